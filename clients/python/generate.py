"""Generate `iris_client/_generated.py` from Iris's OpenAPI schema.

    python clients/python/generate.py          # from this checkout's code (from the repo root)
    python clients/python/generate.py --check  # exit 1 when the committed file is stale
    python clients/python/generate.py --schema http://127.0.0.1:8000/api/schema/?format=json

What it writes: a `Literal` alias per enum, a keyword-only dataclass per object schema,
and one method per operation (named by its operationId) that calls the hand-written
transport. Only the standard library is used, so the output depends on the schema alone.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import subprocess  # nosec B404 - runs ruff with a fixed argv
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = HERE / "iris_client" / "_generated.py"
MUTATING = {"post", "put", "patch", "delete"}
# Parameters the transport sets itself.
TRANSPORT_HEADERS = {"Idempotency-Key"}


def snake(name: str, *, taken: frozenset[str] = frozenset()) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    if keyword.iskeyword(name) or name in taken:
        name += "_"
    return name


# A method's own parameter names, which a path or query parameter must not shadow.
METHOD_NAMES = frozenset({"self", "body", "idempotency_key"})


def ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


class Generator:
    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.components: dict[str, Any] = schema.get("components", {}).get("schemas", {})

    def is_enum(self, name: str) -> bool:
        return "enum" in self.components[name]

    def literal(self, values: list[Any]) -> str:
        return "Literal[" + ", ".join(json.dumps(v) for v in values if v is not None) + "]"

    def py_type(self, s: dict[str, Any]) -> str:
        nullable = bool(s.get("nullable"))
        if "$ref" in s:
            base = ref_name(s["$ref"])
        elif "allOf" in s and len(s["allOf"]) == 1:
            base = self.py_type(s["allOf"][0])
        elif "oneOf" in s or "anyOf" in s:
            options = [self.py_type(o) for o in s.get("oneOf") or s.get("anyOf")]
            base = " | ".join(dict.fromkeys(options))
        elif "enum" in s:
            values = s["enum"]
            nullable = nullable or None in values
            base = self.literal(values)
        else:
            kind = s.get("type")
            if kind == "string":
                base = {"date-time": "datetime", "binary": "bytes"}.get(s.get("format", ""), "str")
            elif kind == "integer":
                base = "int"
            elif kind == "number":
                base = "float"
            elif kind == "boolean":
                base = "bool"
            elif kind == "array":
                base = f"list[{self.py_type(s.get('items', {}))}]"
            elif kind == "object" or "properties" in s or "additionalProperties" in s:
                extra = s.get("additionalProperties")
                props = s.get("properties", {}).values()
                if (
                    isinstance(extra, dict)
                    and extra.get("type") == "string"
                    and all(p.get("type") == "string" or "enum" in p for p in props)
                ):
                    base = "dict[str, str]"
                else:
                    base = "dict[str, Any]"
            else:
                base = "Any"
        return f"{base} | None" if nullable and base != "Any" else base

    def doc(self, text: str, indent: str) -> list[str]:
        text = " ".join(text.split())
        if not text:
            return []
        text = text.replace("\\", "\\\\").replace('"""', "'''")
        lines = textwrap.wrap(text, 88 - len(indent))
        if len(lines) == 1 and len(lines[0]) + len(indent) + 6 <= 100:
            return [f'{indent}"""{lines[0]}"""']
        return [
            f'{indent}"""{lines[0]}',
            *(f"{indent}{line}" for line in lines[1:]),
            f'{indent}"""',
        ]

    def model(self, name: str) -> list[str]:
        s = self.components[name]
        required = set(s.get("required", []))
        out = ["", "", "@dataclass(kw_only=True)", f"class {name}(Model):"]
        out += self.doc(s.get("description", ""), "    ")
        props = s.get("properties", {})
        for wire, prop in props.items():
            attr = snake(wire)
            tp = self.py_type(prop)
            args = []
            if wire not in required:
                if not tp.endswith("| None") and tp != "Any":
                    tp += " | None"
                args.append("default=None")
            if attr != wire:
                args.append(f'metadata={{"wire": "{wire}"}}')
            if not args:
                out.append(f"    {attr}: {tp}")
            elif args == ["default=None"]:
                out.append(f"    {attr}: {tp} = None")
            else:
                out.append(f"    {attr}: {tp} = field({', '.join(args)})")
        if not props:
            out.append("    pass")
        return out

    def responses(self, op: dict[str, Any]) -> tuple[list[tuple[int, str]], list[str]]:
        """(status → runtime expectation, return type names) for the 2xx answers."""
        table: list[tuple[int, str]] = []
        types: list[str] = []
        for code, response in sorted(op.get("responses", {}).items()):
            if not code.isdigit() or not 200 <= int(code) < 300:
                continue
            content = response.get("content", {})
            json_schema = (content.get("application/json") or {}).get("schema")
            if json_schema and "$ref" in json_schema:
                name = ref_name(json_schema["$ref"])
                table.append((int(code), name))
                types.append(name)
            elif any(s.get("schema", {}).get("format") == "binary" for s in content.values()):
                table.append((int(code), "bytes"))
                types.append("bytes")
            elif int(code) == 202 and not content:
                table.append((202, "None"))
                types.append("HeldForApproval")
            else:
                table.append((int(code), "None"))
                types.append("Any")
        return table, list(dict.fromkeys(types)) or ["None"]

    def operation(self, path: str, method: str, op: dict[str, Any]) -> list[str]:
        name = snake(op["operationId"])
        params = [
            p
            for p in op.get("parameters", [])
            if not (p["in"] == "header" and p["name"] in TRANSPORT_HEADERS)
        ]
        in_path = [p for p in params if p["in"] == "path"]
        in_query = [p for p in params if p["in"] == "query"]
        body_schema = (
            op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        )
        sig = ["self"]
        for p in in_path:
            sig.append(
                f"{snake(p['name'], taken=METHOD_NAMES)}: {self.py_type(p.get('schema', {}))}"
            )
        if body_schema is not None:
            body_type = self.py_type(body_schema)
            if op["requestBody"].get("required"):
                sig.append(f"body: {body_type}")
            else:
                sig.append(f"body: {body_type} | None = None")
        sig.append("*")
        ordered = sorted(in_query, key=lambda p: not p.get("required", False))
        for p in ordered:
            tp = self.py_type(p.get("schema", {}))
            if p.get("required"):
                sig.append(f"{snake(p['name'], taken=METHOD_NAMES)}: {tp}")
            else:
                sig.append(f"{snake(p['name'], taken=METHOD_NAMES)}: {tp} | None = None")
        if method in MUTATING:
            sig.append("idempotency_key: str | None = None")
        if sig[-1] == "*":
            sig.pop()
        table, types = self.responses(op)
        returns = " | ".join(types)
        out = ["", f"    def {name}(", *(f"        {s}," for s in sig), f"    ) -> {returns}:"]
        summary = op.get("summary") or ""
        description = op.get("description") or ""
        text = f"{method.upper()} {path}. {summary}".strip()
        if description:
            text += " " + description
        out += self.doc(text, "        ")
        call = [f'"{method.upper()}"', f'"{path}"']
        if in_path:
            items = ", ".join(
                f'"{p["name"]}": {snake(p["name"], taken=METHOD_NAMES)}' for p in in_path
            )
            call.append(f"path_params={{{items}}}")
        if in_query:
            items = ", ".join(
                f'"{p["name"]}": {snake(p["name"], taken=METHOD_NAMES)}' for p in in_query
            )
            call.append(f"query={{{items}}}")
        if body_schema is not None:
            call.append("body=body")
        if method in MUTATING:
            call.append("idempotency_key=idempotency_key")
        call.append("responses={" + ", ".join(f"{c}: {t}" for c, t in table) + "}")
        out.append("        return cast(")
        out.append(f'            "{returns}",')
        out.append("            self._call(")
        out += [f"                {c}," for c in call]
        out.append("            ),")
        out.append("        )")
        return out

    def render(self) -> str:
        info = self.schema.get("info", {})
        out = [
            f'"""Generated by clients/python/generate.py from the {info.get("title", "")} schema '
            f'(version {info.get("version", "")}): do not edit; regenerate."""',
            "",
            "# ruff: noqa: E501",
            "from __future__ import annotations",
            "",
            "from dataclasses import dataclass, field",
            "from datetime import datetime",
            "from typing import Any, Literal, TypeAlias, cast",
            "",
            "from iris_client._model import Model",
            "from iris_client._transport import HeldForApproval, Transport",
            "",
        ]
        names = ["HeldForApproval", "Operations", *self.components]
        out.append("__all__ = [" + ", ".join(f'"{n}"' for n in sorted(names)) + "]")
        enums = sorted(n for n in self.components if self.is_enum(n))
        if enums:
            out.append("")
        for name in enums:
            out.append(f"{name}: TypeAlias = {self.literal(self.components[name]['enum'])}")
        for name in sorted(n for n in self.components if not self.is_enum(n)):
            out += self.model(name)
        out += ["", "", "class Operations(Transport):"]
        out.append('    """One method per operation of the Iris API, named by its operationId."""')
        operations = []
        for path, item in self.schema.get("paths", {}).items():
            for method, op in item.items():
                if method in {"get", "post", "put", "patch", "delete"}:
                    operations.append((op["operationId"], path, method, op))
        for _, path, method, op in sorted(operations):
            out += self.operation(path, method, op)
        return "\n".join(out) + "\n"


def formatted(code: str) -> str:
    """The code as `ruff format` (the repository's formatter) leaves it."""
    result = subprocess.run(  # noqa: S603  # nosec B603 - this interpreter's ruff, fixed arguments
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=code,
        capture_output=True,
        text=True,
        check=True,
        cwd=HERE,
    )
    return result.stdout


def schema_from_code() -> dict[str, Any]:
    """The schema `/api/schema/` serves, built in-process from this checkout."""
    sys.path.insert(0, str(HERE.parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "iris_site.settings")
    os.environ.setdefault("DEBUG", "1")
    import django

    django.setup()
    from drf_spectacular.generators import SchemaGenerator

    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(json.dumps(schema))


def schema_from(source: str) -> dict[str, Any]:
    if source.startswith(("http://", "https://")):
        # A URL the user gave, checked to be http(s) above.
        request = urllib.request.Request(source, headers={"Accept": "application/json"})  # noqa: S310
        with urllib.request.urlopen(request) as response:  # noqa: S310  # nosec B310 - the schema URL the developer names
            return dict(json.load(response))
    return dict(json.loads(Path(source).read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schema", help="a schema file or URL (default: this checkout's code)")
    parser.add_argument("--check", action="store_true", help="fail when the file is stale")
    args = parser.parse_args(argv)
    schema = schema_from(args.schema) if args.schema else schema_from_code()
    code = formatted(Generator(schema).render())
    if args.check:
        if not TARGET.exists() or TARGET.read_text() != code:
            print(f"{TARGET} is stale: run python clients/python/generate.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(code)
    print(
        f"wrote {TARGET.relative_to(Path.cwd()) if TARGET.is_relative_to(Path.cwd()) else TARGET}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
