"""`kubectl sparkpoint`: the kubectl plugin (console script `kubectl-sparkpoint`)."""
