#!/usr/bin/env python3
"""The DaemonSet manifest as `kubectl apply --dry-run=client` with strict validation would take it:
valid YAML, one apps/v1 DaemonSet whose every field is one the API has, of its type
(daemonset-fields.schema.json), plus what the API server checks beyond types: the selector
matches the pod template's labels, every volume mount names a volume, and the container runs the
installer with options it knows.

usage: check-manifest.py MANIFEST SCHEMA INSTALLER"""
import json
import re
import sys

import jsonschema
import yaml

manifest, schema_path, installer = sys.argv[1:4]
docs = [d for d in yaml.safe_load_all(open(manifest)) if d is not None]
problems = []
if len(docs) != 1:
    problems.append(f"{len(docs)} documents, expected one DaemonSet")
ds = docs[0] if docs else {}
validator = jsonschema.Draft7Validator(json.load(open(schema_path)))
for e in sorted(validator.iter_errors(ds), key=lambda e: list(e.path)):
    problems.append(f"{'.'.join(str(p) for p in e.path) or '(top)'}: {e.message}")
if not problems:
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"].get("metadata", {}).get("labels", {})
    for k, v in spec["selector"].get("matchLabels", {}).items():
        if labels.get(k) != v:
            problems.append(f"spec.selector.matchLabels.{k}: the pod template's labels do not match it")
    volumes = {v["name"] for v in pod.get("volumes", [])}
    options = set(re.findall(r"--[a-z-]+", open(installer).read()))
    for c in pod["containers"]:
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                problems.append(f"container {c['name']}: volume mount {m['name']} names no volume")
        for arg in c.get("command", []) + c.get("args", []):
            if arg.startswith("--") and arg not in options:
                problems.append(f"container {c['name']}: {arg} is not an option of {installer}")
for p in problems:
    print(f"check-manifest: {manifest}: {p}")
if problems:
    sys.exit(1)
print(f"check-manifest: {manifest}: a valid DaemonSet ({len(ds['spec']['template']['spec']['containers'])} container)")
