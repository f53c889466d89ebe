"""mkdocs hooks: what the docs take from the code and the repository as they are built.

- The experiments' published plots (examples/experiments/results/**/*.png) are served at
  experiments/results/..., so pages show the committed figures, never copies of them;
  pages link them where they are in the repository (../../examples/experiments/...), as
  GitHub shows them, and the site's pages are pointed at where they are served.
- `<!-- openapi -->` in a page becomes the master's OpenAPI document
  (master.http.openapi), rendered as Markdown: the reference is the document the master
  serves at /api/v1/openapi.json, so it cannot drift from it.
- `<!-- roles-schema -->` becomes the roles file's fields, from its pydantic model.
- `<!-- metrics -->` becomes the table of the master's Prometheus metrics, read from where
  the master defines them (`master/`: each metric family with its name and help).
- `<!-- ideal-distance -->` becomes the table of how far each published simulated run
  strays from its policy's ideal, read from its summary.json (`distance_from_ideal`): the
  page shows what the runs give, never a copy typed by hand.
- The commands' page shows no default for an option without one (click's UNSET sentinel).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
OPENAPI = "<!-- openapi -->"
ROLES = "<!-- roles-schema -->"
METRICS = "<!-- metrics -->"
DISTANCE = "<!-- ideal-distance -->"
# the published plots, as a page one folder down links them in the repository, and where
# the site serves them (`on_files`)
IN_REPOSITORY = "../../examples/experiments/results/"
SERVED = "../experiments/results/"
METRIC = re.compile(
    r'(Counter|Gauge|Histogram)(?:MetricFamily)?\(\s*"(drfmesos_\w+)",\s*((?:"[^"]*"\s*)+)'
)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for png in sorted((EXAMPLES / "experiments" / "results").rglob("*.png")):
        files.append(
            File(
                png.relative_to(EXAMPLES).as_posix(),
                src_dir=str(EXAMPLES),
                dest_dir=config.site_dir,
                use_directory_urls=config.use_directory_urls,
            )
        )
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    markdown = markdown.replace(f"]({IN_REPOSITORY}", f"]({SERVED}")
    if METRICS in markdown:
        markdown = markdown.replace(METRICS, render_metrics(metrics()))
    if DISTANCE in markdown:
        results = EXAMPLES / "experiments" / "results"
        markdown = markdown.replace(DISTANCE, render_distance(results))
    if ROLES in markdown:
        from master.roles_file import RolesFile

        schema = RolesFile.model_json_schema()
        markdown = markdown.replace(ROLES, render_schemas({"RolesFile": schema, **schema["$defs"]}))
    if OPENAPI not in markdown:
        return markdown
    from master.http.openapi import openapi

    return markdown.replace(OPENAPI, render_openapi(openapi()))


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    # click 8.2 and later hold an option given no default as its UNSET sentinel, which
    # mkdocs-click prints as the default ("Sentinel.UNSET", 18 times on the commands' page)
    return html.replace("<code>Sentinel.UNSET</code>", "")


def metrics() -> dict[str, tuple[str, str]]:
    """Every metric the master defines: name -> (kind, help), read from its source."""
    found = {}
    for path in sorted((ROOT / "master").rglob("*.py")):
        for kind, name, help_ in METRIC.findall(path.read_text()):
            found[name] = (kind.lower(), " ".join(re.findall(r'"([^"]*)"', help_)))
    return dict(sorted(found.items()))


def render_metrics(found: dict[str, tuple[str, str]]) -> str:
    rows = ["| metric | kind | what |", "|---|---|---|"]
    for name, (kind, help_) in found.items():
        shown = f"{name}_total" if kind == "counter" else name  # (as Prometheus names it)
        rows.append(f"| `{shown}` | {kind} | {cell(help_)} |")
    return "\n".join(rows)


def render_distance(results: Path) -> str:
    """Each published simulated run's distance from its ideal, per framework: the mean
    over the settled samples (and the largest), in tasks; and the verdict, which says when
    a phase was measured at its last sample (its tasks outlast it) or nothing was."""
    rows = [
        "| run (simulated) | mean distance from the ideal, tasks (max) | within one task |",
        "|---|---|---|",
    ]
    for path in sorted(results.glob("*-sim/summary.json")):
        distance = json.loads(path.read_text()).get("distance_from_ideal")
        if not distance:
            continue
        gaps = ", ".join(
            f"{name} {f['mean_tasks']:.2f} ({f['max_tasks']:.2f})"
            for name, f in distance["frameworks"].items()
        )
        verdict = {None: "not measured", True: "yes", False: "no"}[distance["within_one_task"]]
        if distance.get("measured_at_end"):
            verdict += " (measured at the end: tasks outlast a phase)"
        rows.append(f"| `{path.parent.name}` | {gaps or '-'} | {verdict} |")
    return "\n".join(rows)


def render_openapi(doc: dict[str, Any]) -> str:
    """Each path with its parameters and answer, then each schema with its fields."""
    out = ["## Paths", ""]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            out += [f"### {method.upper()} `{path}`", "", op.get("summary", ""), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | |", "|---|---|---|---|"]
                for p in params:
                    required = "required" if p.get("required") else ""
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {type_of(p.get('schema', {}))} "
                        f"| {required} {cell(p.get('description', ''))} |"
                    )
                out.append("")
            for status, answer in op.get("responses", {}).items():
                kinds = answer.get("content", {})
                shown = ", ".join(
                    f"`{media}` {type_of(c.get('schema', {}))}" for media, c in kinds.items()
                )
                out.append(f"- **{status}** {answer.get('description', '')}: {shown}".rstrip(": "))
            out.append("")
    out += ["## Schemas", "", render_schemas(doc["components"]["schemas"])]
    return "\n".join(out)


def render_schemas(schemas: dict[str, Any]) -> str:
    """Each named schema as a heading and a table of its fields."""
    out = []
    for name, schema in schemas.items():
        out += [f"### {name}", "", cell(schema.get("description", "")), ""]
        if "enum" in schema:
            out += ["One of: " + ", ".join(f"`{v}`" for v in schema["enum"]), ""]
            continue
        props = schema.get("properties", {})
        if props:
            out += ["| field | type | default | |", "|---|---|---|---|"]
            required = set(schema.get("required", []))
            for field, spec in props.items():
                need = "required. " if field in required else ""
                default = f"`{spec['default']}`" if "default" in spec else ""
                out.append(
                    f"| `{field}` | {type_of(spec)} | {default} "
                    f"| {need}{cell(spec.get('description', ''))} |"
                )
            out.append("")
    return "\n".join(out)


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words, with a link to a named schema."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(type_of(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {type_of(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {type_of(schema['additionalProperties'])}"
    return str(kind)


def cell(text: str) -> str:
    """Text that stays inside one table cell."""
    return " ".join(text.split()).replace("|", "\\|")
