"""The StreamingJob CRD, generated from the spec and status models (`python -m sparkpoint.operator.crd`)."""
