"""The operator's decisions, pure: what it sees (model, observe), what it decides (`machine.decide` and its
rows: step, upgrade, rescale, pod failures, savepoints, finalize), and the status it writes (status_model,
status). No I/O and nothing of Kubernetes' client, kopf or the other rooms (pyproject.toml's contracts)."""
