"""The StreamingJobSavepoint resource: its model and CRD, the pure decision of its next step (decide),
the steps that act on it, their store side and the kopf handlers."""
