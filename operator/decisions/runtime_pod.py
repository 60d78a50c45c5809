"""What the runtime's pod is, as both sides of the operator know it: kube/builders.py builds the pod
with these, and the decisions read its failures back in their terms (failure_causes.py)."""

RUN_AS_USER = 185  # the image's spark user: the uid (and fsGroup) of the job's containers
HOT_DIR = "/var/lib/sparkpoint"  # where the runtime's container mounts the hot volume
