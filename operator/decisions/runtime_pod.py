"""What the runtime's pod is, as both sides of the operator know it: kube/builders.py builds the pod
with these, and the decisions read its failures back in their terms (failure_causes.py)."""

RUN_AS_USER = 185  # the image's spark user: the uid (and fsGroup) of the job's containers
HOT_DIR = "/var/lib/sparkpoint"  # where the runtime's container mounts the hot volume
# A pod started as a standby (decisions/standby.py): it is named <job>-<attempt>-standby and carries the
# spec key (and restartNonce) it runs and the restore point (tag) of the job file it read, so a round can tell whether
# promoting it gives the attempt the machine would create.
STANDBY_SPEC_ANNOTATION = "sparkpoint.dev/standby-spec"
STANDBY_POINT_ANNOTATION = "sparkpoint.dev/standby-point"
STANDBY_SUFFIX = "-standby"
