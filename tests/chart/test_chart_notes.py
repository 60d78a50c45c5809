"""What `helm install` prints (templates/NOTES.txt) must work when pasted: the example job names
namespace default, so the suggested commands either use default (watched) or rewrite the
namespace for a watched one. helm renders NOTES.txt only on install, which needs a cluster, so the
test renders the same text through a copy of the chart where it is a named template."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml
from conftest import CHART, RELEASE, RELEASE_NS


def notes(helm: str, tmp_path, *sets: str) -> str:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    text = (chart / "templates" / "NOTES.txt").read_text()
    (chart / "templates" / "NOTES.txt").unlink()
    (chart / "templates" / "_notes_under_test.tpl").write_text('{{- define "notes" -}}\n' + text + "{{- end -}}\n")
    (chart / "templates" / "notes.yaml").write_text('notes: {{ include "notes" . | toJson }}\n')
    args = [a for s in sets for a in ("--set", s)]
    out = subprocess.run([helm, "template", RELEASE, str(chart), "--namespace", RELEASE_NS, *args,
                          "--show-only", "templates/notes.yaml"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)["notes"]


@pytest.mark.parametrize("sets", [(), ("watchNamespaces={default,team-a}",)])
def test_notes_apply_the_example_where_it_says_it_lives(helm, tmp_path, sets):
    text = notes(helm, tmp_path, *sets)
    assert "kubectl apply -f examples/streamingjob.yaml" in text
    assert "kubectl get sj -n default -w" in text
    assert f"-n {RELEASE_NS} -f examples" not in text  # the example's namespace is default


def test_notes_rewrite_the_namespace_when_default_is_not_watched(helm, tmp_path):
    text = notes(helm, tmp_path, "watchNamespaces={team-a,team-b}")
    assert "sed 's/namespace: default/namespace: team-a/' examples/streamingjob.yaml | kubectl apply -f -" in text
    assert "kubectl get sj -n team-a -w" in text and "sparkpoint-storage" in text
