"""Jinja2 rendering of the system prompt and of tools in each format. Pure: strings in, strings out."""
from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import jinja2
from jinja2.sandbox import SecurityError

from evoharness.compiler.errors import ConfigError
from evoharness.compiler.template_bounds import BoundedEnvironment
from evoharness.compiler.template_budget import FIX, TemplateTooCostly, bounded
from evoharness.compiler.toolspec import ToolSpec
from evoharness.compiler.workflow import WorkflowStep


@lru_cache(maxsize=8)
def _env(template_dirs: tuple[str, ...] = ()) -> jinja2.Environment:
    # Prompt text comes from config files, overrides and registry snapshots: a template is data, so it
    # renders in the sandbox (no attribute walks to Python internals, no mutation of the context).
    # It also bounds the work a template can ask for (loops, calls, sizes, time): see template_bounds.
    # A template in a config dir's templates/ folder wins over the built-in one of the same name.
    return BoundedEnvironment(
        loader=jinja2.ChoiceLoader([*(jinja2.FileSystemLoader(d) for d in template_dirs),
                                    jinja2.PackageLoader("evoharness.compiler", "templates")]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


@lru_cache(maxsize=1)
def _builtin_env() -> jinja2.Environment:
    # The tool usage and intro templates are the package's own and no config dir replaces them; the
    # config text they print (descriptions, names) is data to them, never template source, so their
    # work is linear in it and needs no render budget (which would cost a compile a millisecond a tool).
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    return ImmutableSandboxedEnvironment(loader=jinja2.PackageLoader("evoharness.compiler", "templates"), undefined=jinja2.StrictUndefined,
                                         keep_trailing_newline=True, autoescape=False)


def render_text(path: str, text: str, context: Mapping[str, Any]) -> str:
    try:
        with bounded():  # one budget for the compile (which folds constants) and the render
            return _env().from_string(text).render(**context).strip()
    except TemplateTooCostly as exc:
        raise ConfigError(path, f"template exceeds a render bound: {exc}", FIX) from None
    except jinja2.UndefinedError as exc:
        raise ConfigError(path, f"template uses an undefined variable ({exc.message})",
                          f"define it under agent.vars or remove it; available: {sorted(context)}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(path, f"bad template syntax ({exc.message}, line {exc.lineno})",
                          "fix the Jinja2 markup or escape braces with {% raw %}") from None
    except SecurityError as exc:
        raise ConfigError(path, f"template reaches outside its variables ({exc})",
                          f"use only the template variables {sorted(context)}; templates cannot reach Python internals") from None
    except Exception as exc:  # a template is data: whatever fails while rendering it is bad input, not a crash
        raise ConfigError(path, f"template failed to render ({type(exc).__name__}: {exc})",
                          "fix the Jinja2 expression or escape braces with {% raw %}") from None


def section_title(name: str) -> str:
    return name.replace("_", " ").strip().capitalize()


def render_system_prompt(
    *,
    template: str,
    sections: Mapping[str, str],
    steps: Sequence[WorkflowStep],
    tools: Sequence[ToolSpec],
    context: Mapping[str, Any],
    template_dirs: Sequence[str] = (),
) -> str:
    """Sections in order, then the workflow (already rendered) as a numbered procedure, then tool rules."""
    rendered_sections = [
        (section_title(name), render_text(f"agent.prompt_sections.{name}", text, context)) for name, text in sections.items()
    ]
    rendered_steps = [{"name": s.name, "instructions": " ".join(s.instructions.split())} for s in steps]
    rules = [{"tool": t.name, "text": r.strip()} for t in tools for r in t.rules]
    with _bounded("agent.template"):
        try:
            tpl = _env(tuple(template_dirs)).get_template(template)
        except jinja2.TemplateNotFound:
            where = [*template_dirs, "the built-in templates"]
            raise ConfigError("agent.template", f"no template named {template!r} in {', '.join(where)}",
                              "use system_prompt.md.j2 or add the file to a templates/ folder of a config dir (--config-dir DIR)") from None
        try:
            text = tpl.render(sections=rendered_sections, steps=rendered_steps, rules=rules, **context)
        except jinja2.UndefinedError as exc:
            raise ConfigError("agent.template", f"template {template!r} uses an undefined variable ({exc.message})",
                              f"pass it under agent.vars; available: {sorted(context)}") from None
        except SecurityError as exc:  # a config dir's template is data too, and named as such
            raise ConfigError("agent.template", f"template {tpl.filename or template!r} reaches outside its variables ({exc})",
                              "use only the template variables; templates cannot reach Python internals") from None
    return text.strip() + "\n"


@contextmanager
def _bounded(path: str) -> Iterator[None]:
    """A budget for compiling and rendering one template; going past a bound is a ConfigError at ``path``."""
    try:
        with bounded():
            yield
    except TemplateTooCostly as exc:
        raise ConfigError(path, f"template exceeds a render bound: {exc}", FIX) from None


def _schema_type(schema: Mapping[str, Any]) -> str:
    t = schema.get("type", "any")
    if isinstance(t, list):
        return "|".join(str(x) for x in t)
    if t == "array" and isinstance(schema.get("items"), Mapping) and "type" in schema["items"]:
        return f"array[{schema['items']['type']}]"
    return str(t)


def render_bash_usage(tool: ToolSpec) -> str:
    """One tool's usage block: `name --arg <type>  description` per parameter."""
    required = set(tool.required())
    args = [
        {
            "name": name,
            "type": _schema_type(sub),
            "description": " ".join(str(sub.get("description", "")).split()),
            "required": name in required,
        }
        for name, sub in tool.properties().items()
    ]
    return _builtin_env().get_template("tool_usage.md.j2").render(tool=tool, args=args).strip() + "\n"


def render_tools_intro(tool_format: str) -> str:
    return _builtin_env().get_template("tools_intro.md.j2").render(tool_format=tool_format).strip() + "\n"


def render_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    """The OpenAI `tools` entry, passed to litellm as native tools."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": _plain(tool.parameters),
        },
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
