"""Where a job's store is, as the operator opens it: its URL and endpoint and the names of the Secrets
that hold its credentials (store/view.py builds one from a job's spec; a StreamingJobSavepoint records
its job's in its status, savepoint/model.py). Never the credentials themselves."""

from __future__ import annotations

from sparkpoint.runtime.spec import SpecModel


class StorageRef(SpecModel):
    """Where the savepoint lives (copied from its job; names a Secret, never holds credentials)."""

    url: str
    endpoint: str | None = None
    secret_name: str | None = None
    # spec.gc.secretRef of the job: the credential that may delete (used to delete the data).
    gc_secret_name: str | None = None
