"""A small Kubernetes REST client for the node agent: JSON dicts in and out, client-certificate
authentication from a kubeconfig whose credentials are file references (as cluster.py writes)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml


class ApiError(Exception):
    def __init__(self, status: int, method: str, path: str, body: str):
        super().__init__(f"{method} {path} -> HTTP {status}: {body[:500]}")
        self.status = status


class KubeClient:
    def __init__(self, kubeconfig: Path, timeout: float = 30):
        config = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self.ca_file = cluster["certificate-authority"]
        self.ssl = ssl.create_default_context(cafile=self.ca_file)
        self.ssl.load_cert_chain(user["client-certificate"], user["client-key"])
        self.timeout = timeout

    def request(self, method: str, path: str, body: dict | None = None,
                content_type: str = "application/json", query: dict | None = None) -> dict:
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self.ssl, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, method, path, error.read().decode(errors="replace")) from None
        return json.loads(raw) if raw else {}

    def get(self, path: str, **query) -> dict:
        return self.request("GET", path, query=query or None)

    def merge_patch(self, path: str, body: dict) -> dict:
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def strategic_patch(self, path: str, body: dict) -> dict:
        return self.request("PATCH", path, body, "application/strategic-merge-patch+json")
