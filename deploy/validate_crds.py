#!/usr/bin/env python3
"""Validates the Prometheus Operator objects of rendered manifests against the operator's
published schemas, strictly.

kubernetes-validate knows only the core kinds. For ServiceMonitor, PodMonitor and
PrometheusRule this uses the models that PyPI's `cloudcoil-models-prometheus-operator`
generates from the operator's own CustomResourceDefinitions (pinned in .ci/run, so the
schemas are a fixed, published version rather than text copied into this repository).
Validating a model checks types, required fields, enums and patterns (a duration such as
`interval: thirty` fails). Those schemas accept unknown fields, which the API server would
then prune without a word, so this also walks each object against the models' declared
fields and refuses any field the schema does not name (a misspelt `intervall` fails).

Usage: validate_crds.py RENDERED.yaml
Prints one line per object ("passed" or what is wrong) and exits 1 if any failed.
"""

import sys
import types
import typing

import pydantic
import yaml
from cloudcoil.models.prometheus_operator import v1

API_VERSION = "monitoring.coreos.com/v1"
KINDS = {
    "ServiceMonitor": v1.ServiceMonitor,
    "PodMonitor": v1.PodMonitor,
    "PrometheusRule": v1.PrometheusRule,
}


def models_in(annotation):
    """The pydantic model classes an annotation can hold (through Optional, List, Dict,
    Annotated and unions), and whether it is a mapping whose values are those models."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation], False
    if origin is typing.Annotated:
        return models_in(args[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set):
        found, mapping = [], False
        for arg in args:
            more, is_map = models_in(arg)
            found += more
            mapping = mapping or is_map
        return found, mapping
    if origin is dict:
        found, _ = models_in(args[1]) if len(args) == 2 else ([], False)
        return found, True
    return [], False


def unknown_fields(model, data, path):
    """Paths of the fields in `data` that `model` (and the models under it) do not name."""
    if not isinstance(data, dict):
        return []
    by_key = {}
    for name, field in model.model_fields.items():
        by_key[field.alias or name] = field
        by_key.setdefault(name, field)
    problems = []
    for key, value in data.items():
        field = by_key.get(key)
        if field is None:
            problems.append(f"{path}.{key}")
            continue
        inner, mapping = models_in(field.annotation)
        if not inner:
            continue
        values = value if isinstance(value, list) else [value]
        for i, item in enumerate(values):
            where = f"{path}.{key}" + (f"[{i}]" if isinstance(value, list) else "")
            items = item.items() if mapping and isinstance(item, dict) else [(None, item)]
            for sub, element in items:
                at = where if sub is None else f"{where}.{sub}"
                # A union of models: the object must fit at least one of them.
                best = min(
                    (unknown_fields(m, element, at) for m in inner), key=len, default=[]
                )
                problems += best
    return problems


def check(doc):
    kind = doc.get("kind")
    model = KINDS.get(kind)
    if doc.get("apiVersion") != API_VERSION or model is None:
        return [f"no published schema here for {doc.get('apiVersion')}/{kind}"]
    problems = []
    try:
        model.model_validate(doc)
    except pydantic.ValidationError as err:
        for e in err.errors():
            problems.append(".".join(str(p) for p in e["loc"]) + ": " + e["msg"])
    problems += [f"{p[1:]}: not a field of the schema" for p in unknown_fields(model, doc, "")]
    return problems


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as err:
        print(f"{sys.argv[1]}: {err}")
        return 1
    failed = 0
    for doc in docs:
        if not str(doc.get("apiVersion", "")).startswith("monitoring.coreos.com/"):
            continue
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        problems = check(doc)
        if problems:
            failed += 1
            for p in problems:
                print(f"{name}: {p}")
        else:
            print(f"{name}: passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
