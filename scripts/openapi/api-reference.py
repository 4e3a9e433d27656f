#!/usr/bin/env python3
"""Writes docs/api.md, the API reference, from the OpenAPI document (the document is the source).

    api-reference.py            rewrite docs/api.md
    api-reference.py --check    exit 1 (with a diff) when docs/api.md is not what the document gives

Plain Python 3, no packages: scripts/test.sh runs --check, so a change to the document without
regenerating the reference fails the tests.
"""
import difflib
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCUMENT = REPO / "Sources/LatchkeyServer/OpenAPI/openapi.json"
OUTPUT = REPO / "docs/api.md"
METHODS = ["get", "put", "post", "patch", "delete"]


class Renderer:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = doc["components"]["schemas"]
        self.responses = doc["components"].get("responses", {})

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            kind, name = node["$ref"].split("/")[-2:]
            node = self.doc["components"][kind][name]
        return node

    def type_of(self, schema, depth=0):
        """A one-line type: `string`, `[Passkey]`, `Tokens`, `"ios" | "android"`, `{a, b?}`."""
        if not isinstance(schema, dict) or not schema:
            return "any"
        if set(schema) <= {"required", "description"} and schema.get("required"):
            return "(" + " + ".join(f"`{r}`" for r in schema["required"]) + ")"
        if "$ref" in schema:
            name = schema["$ref"].split("/")[-1]
            return f"[{name}](#{name.lower()})"
        if "const" in schema:
            return json.dumps(schema["const"])
        if "enum" in schema:
            return " | ".join(json.dumps(v) for v in schema["enum"])
        for key, joiner in (("oneOf", " | "), ("anyOf", " | ")):
            if key in schema:
                return joiner.join(self.type_of(s, depth) for s in schema[key])
        if "allOf" in schema:
            parts = [self.type_of(s, depth) for s in schema["allOf"]]
            extra = {k: v for k, v in schema.items() if k not in ("allOf", "description")}
            if extra:
                parts.append(self.type_of(extra, depth))
            return " & ".join(parts)
        t = schema.get("type")
        if t == "array":
            return f"[{self.type_of(schema.get('items', {}), depth)}]"
        if t == "object" or "properties" in schema:
            props = schema.get("properties", {})
            if not props:
                return "object"
            if depth >= 1:
                required = set(schema.get("required", []))
                return "{" + ", ".join(f"{k}{'' if k in required else '?'}" for k in props) + "}"
            required = set(schema.get("required", []))
            return "{" + ", ".join(f"{k}{'' if k in required else '?'}: {self.type_of(v, depth + 1)}" for k, v in props.items()) + "}"
        if isinstance(t, list):
            return " | ".join(t)
        text = t or "any"
        if schema.get("format"):
            text += f" ({schema['format']})"
        return text

    def fields(self, schema):
        """Rows (name, type, required, description) of an object schema, or None."""
        schema = self.resolve(schema)
        if isinstance(schema, dict) and "allOf" in schema and "properties" not in schema:
            schema = next((self.resolve(part) for part in schema["allOf"] if "properties" in self.resolve(part)), schema)
        if not isinstance(schema, dict) or "properties" not in schema:
            return None
        required = set(schema.get("required", []))
        rows = []
        for name, prop in schema["properties"].items():
            resolved = prop if "$ref" in prop else prop
            description = prop.get("description", "") or self.resolve(prop).get("description", "") if "$ref" in prop else prop.get("description", "")
            rows.append((name, self.type_of(resolved, 1), "yes" if name in required else "", description))
        return rows

    def table(self, header, rows):
        out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        for row in rows:
            out.append("| " + " | ".join(str(c).replace("\n", " ").replace("|", "\\|") for c in row) + " |")
        return out

    @staticmethod
    def common_status(response):
        """A common response's status: a problem's `status` const, or an OAuth error's `x-status`."""
        if "x-status" in response:
            return response["x-status"]
        schema = next(iter(response["content"].values()))["schema"] if response.get("content") else None
        return schema and schema["allOf"][1]["properties"]["status"]["const"]

    def response_codes(self, response):
        response = self.resolve(response)
        for media, content in response.get("content", {}).items():
            schema = content.get("schema", {})
            for part in schema.get("allOf", []):
                code = part.get("properties", {}).get("code", {})
                if "enum" in code:
                    return media, ", ".join(f"`{c}`" for c in code["enum"])
            return media, self.type_of(schema)
        return "", ""

    def operation(self, method, path, op):
        out = [f"### `{method.upper()} {path}`", "", f"{op['summary']}.", ""]
        if op.get("description"):
            out += [op["description"], ""]
        security = op.get("security")
        if security is None:
            schemes = "`bearer`"
        else:
            schemes = " or ".join("none" if not s else "`" + next(iter(s)) + "`" for s in security) or "none"
        out += [f"Access: `{op.get('x-latchkey-access', '?')}` (credentials: {schemes}).", ""]
        params = [self.resolve(p) for p in op.get("parameters", [])]
        if params:
            out += self.table(["parameter", "in", "type", "required", "description"],
                              [(f"`{p['name']}`", p["in"], self.type_of(p.get("schema", {}), 1), "yes" if p.get("required") else "",
                                p.get("description", "")) for p in params])
            out.append("")
        body = op.get("requestBody")
        if body:
            media = ", ".join(f"`{m}`" for m in body["content"])
            schema = next(iter(body["content"].values()))["schema"]
            out += [f"Request body ({media}{'' if body.get('required') else ', optional'}): {self.type_of(schema)}", ""]
            rows = self.fields(schema) if "$ref" not in schema else None
            if rows:
                out += self.table(["member", "type", "required", "description"], [(f"`{n}`", t, r, d) for n, t, r, d in rows])
                out.append("")
        rows = []
        for status, response in op["responses"].items():
            resolved = self.resolve(response)
            media, what = self.response_codes(response)
            meaning = resolved.get("description", "")
            if what and meaning.endswith(f" ({what})"):
                meaning = meaning[: -len(what) - 3]
            rows.append((status, meaning, f"`{media}`" if media else "", what))
        out += self.table(["status", "meaning", "content type", "body / codes"], rows)
        out.append("")
        return out

    def render(self):
        info = self.doc["info"]
        out = ["<!-- Generated by scripts/openapi/api-reference.py from Sources/LatchkeyServer/OpenAPI/openapi.json."
               " Do not edit: change the document and run the script (scripts/test.sh checks this file is current). -->",
               "", f"# {info['title']} (v{info['version']})", "", info.get("summary", ""), "", info["description"], "",
               "The machine-readable document is [`Sources/LatchkeyServer/OpenAPI/openapi.json`](../Sources/LatchkeyServer/OpenAPI/openapi.json);"
               " every server serves its own copy at `GET /openapi.json`.", "", "## Credentials", ""]
        out += self.table(["scheme", "how", "what"],
                          [(f"`{name}`", f"{s['type']}" + (f" {s.get('scheme', '')}" if s.get("scheme") else f" header `{s.get('name', '')}`"),
                            s.get("description", "")) for name, s in self.doc["components"]["securitySchemes"].items()])
        out += ["", "## Operations", ""]
        by_tag = {}
        for path, item in self.doc["paths"].items():
            for method in METHODS:
                if method in item:
                    by_tag.setdefault(item[method]["tags"][0], []).append((method, path, item[method]))
        out += [f"- [{t['name']}](#{t['name'].lower().replace(' ', '-')}): " +
                ", ".join(f"`{m.upper()} {p}`" for m, p, _ in by_tag.get(t["name"], [])) for t in self.doc["tags"]]
        out.append("")
        for tag in self.doc["tags"]:
            out += [f"## {tag['name']}", ""]
            for method, path, op in by_tag.get(tag["name"], []):
                out += self.operation(method, path, op)
        out += ["## Schemas", ""]
        for name, schema in self.schemas.items():
            out += [f"### {name}", ""]
            if schema.get("description"):
                out += [schema["description"], ""]
            rows = self.fields(schema)
            if rows:
                out += self.table(["member", "type", "required", "description"], [(f"`{n}`", t, r, d) for n, t, r, d in rows])
            else:
                out.append(f"{self.type_of(schema)}")
            out.append("")
        out += ["## Common responses", ""]
        out += self.table(["name", "status", "meaning", "codes"],
                          [(name, self.common_status(r), r["description"], self.response_codes(r)[1]) for name, r in self.responses.items()])
        out.append("")
        return "\n".join(out)


def main():
    text = Renderer(json.loads(DOCUMENT.read_text(encoding="utf-8"))).render()
    if "--check" in sys.argv[1:]:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            sys.stdout.writelines(list(difflib.unified_diff(current.splitlines(True), text.splitlines(True), "docs/api.md", "generated"))[:60])
            print("api-reference: docs/api.md is stale: run python3 scripts/openapi/api-reference.py")
            return 1
        print("api-reference: docs/api.md matches the OpenAPI document")
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"api-reference: wrote {OUTPUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
