"""The committed client code is what the generator makes of the current schema: a change
to the API that touches the schema fails here until the client is regenerated
(`make client`, i.e. `python clients/python/generate.py`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from drf_spectacular.generators import SchemaGenerator

GENERATOR = Path(__file__).resolve().parents[2] / "clients" / "python" / "generate.py"


def _generator():
    spec = importlib.util.spec_from_file_location("iris_client_generate", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_client_matches_the_current_schema():
    generate = _generator()
    schema = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True)))

    code = generate.formatted(generate.Generator(schema).render())

    assert code == generate.TARGET.read_text(), (
        "clients/python/iris_client/_generated.py is stale: run `make client`"
    )


def test_every_operation_of_the_schema_has_a_method():
    from iris_client import IrisClient

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation_ids = {
        op["operationId"]
        for item in schema["paths"].values()
        for method, op in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    }

    assert operation_ids and all(callable(getattr(IrisClient, o, None)) for o in operation_ids)
