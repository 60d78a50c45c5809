"""`python -m sparkpoint.operator.crd > crds/streamingjob.yaml` (`make crd`): the StreamingJob CRD."""

import sys

from .streamingjob import render

if __name__ == "__main__":
    sys.stdout.write(render())
