"""`python -m sparkpoint.operator.crd > crds/streamingjob.yaml` (`make crd`): the StreamingJob CRD."""

import sys

from .streamingjob import render

sys.stdout.write(render())
