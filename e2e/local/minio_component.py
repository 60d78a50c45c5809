"""The local cluster's MinIO server, started by `cluster.py up` beside the control plane and stopped by
`down` with it. Pods reach it at the address in `<state>/minio.json` (the host's address on the real
node; every node's pods route there), whose credentials are generated once and kept in a 0600 file.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import urllib.request
from collections.abc import Callable

import components as c


def start(layout: c.Layout, start_component: Callable[..., None], wait_for: Callable[..., None],
          free_port: Callable[[], int]) -> None:
    binary = subprocess.run([str(layout.repo / "scripts" / "ensure-minio.sh")], capture_output=True,
                            text=True, check=True).stdout.strip()
    credentials_file = layout.state / "minio.json"
    if not credentials_file.exists():
        credentials_file.touch(mode=0o600)
        credentials_file.write_text(json.dumps({
            "access_key": "sparkpoint-" + secrets.token_hex(4), "secret_key": secrets.token_urlsafe(24)}))
    credentials = json.loads(credentials_file.read_text())
    credentials["endpoint"] = f"http://{layout.host_ip}:{layout.ports.minio}"  # the port may have moved
    credentials_file.write_text(json.dumps(credentials))
    env = dict(os.environ, MINIO_ROOT_USER=credentials["access_key"],
               MINIO_ROOT_PASSWORD=credentials["secret_key"], MINIO_BROWSER="off", MINIO_UPDATE="off")
    (layout.state / "minio-data").mkdir(exist_ok=True)
    start_component(layout, "minio", c.minio_command(layout, binary, free_port()), env=env)

    def minio_live() -> bool:
        try:
            with urllib.request.urlopen(credentials["endpoint"] + "/minio/health/live", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    wait_for("MinIO to be live", minio_live, 60, layout, "minio")
