#!/usr/bin/env python3
"""Checks that the Kubernetes manifests here parse and agree with each other:
the DaemonSet's scrape annotation names its --metrics port, both use one key
Secret and one image. Prints a "skipped:" line where PyYAML is missing."""
import pathlib
import sys

try:
    import yaml
except ImportError:
    print("skipped: Kubernetes manifests: python3 has no yaml module (PyYAML)")
    sys.exit(0)

HERE = pathlib.Path(__file__).resolve().parent


def load(name, kind):
    docs = [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]
    assert [d["kind"] for d in docs] == [kind], f"{name}: expected one {kind}"
    return docs[0]["spec"]["template"]


def main():
    server = load("daemonset.yaml", "DaemonSet")
    client = load("job.yaml", "Job")
    assert server["spec"]["hostNetwork"] is True, "daemonset: hostNetwork"
    notes = server["metadata"]["annotations"]
    args = server["spec"]["containers"][0]["args"]
    metrics = [a.split(":")[-1] for a in args if a.startswith("--metrics=")]
    assert metrics == [notes["prometheus.io/port"]], "scrape port != --metrics port"
    assert notes["prometheus.io/scrape"] == "true"
    for pod in (server, client):
        assert pod["spec"]["containers"][0]["image"] == server["spec"]["containers"][0]["image"]
        assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "linerate-auth-key"
    print("Kubernetes manifests: daemonset.yaml and job.yaml parse and agree")


main()
