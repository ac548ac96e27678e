"""A small, fixed agent + tool catalog: golden files must not move when bfcl-eval updates."""
from __future__ import annotations

import copy
from typing import Any

TOOL_CFG: dict[str, Any] = {
    "source": None,
    "definitions": {
        "ls": {
            "description": "List the files in the current directory.",
            "parameters": {"type": "object", "properties": {"a": {"type": "boolean", "description": "Include hidden files."}},
                           "required": []},
            "rules": ["pass a=true when the user asks for hidden files"],
        },
        "mv": {
            "description": "Move a file into a directory.",
            "parameters": {
                "type": "object",
                "properties": {
                    "source": {"type": "string", "description": "File to move."},
                    "destination": {"type": "string", "description": "Target directory."},
                },
                "required": ["source", "destination"],
            },
            "examples": ["mv --source report.pdf --destination archive"],
            "mutates_state": True,
        },
        "tail": {
            "description": "Show the last lines of a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "file_name": {"type": "string", "description": "File to read."},
                    "lines": {"type": "integer", "description": "How many lines."},
                },
                "required": ["file_name"],
            },
        },
    },
    "overrides": {},
}

AGENT_CFG: dict[str, Any] = {
    "name": "files_agent",
    "tool_format": "json",
    "tools": ["ls", "mv", "t*"],
    "max_turns": 8,
    "prompt_sections": {
        "role": "You are {{ agent_name }}, an assistant that manages files with {{ tool_names | length }} tools.",
        "policy": "Use only the tools offered.",
        "style": "Be concise.",
    },
    "workflow": [
        {"name": "plan", "instructions": "Decide which tools the request needs."},
        {"name": "act", "instructions": "Call the tools in order.", "after": ["plan"]},
        {"name": "verify", "instructions": "Check every result before answering.", "after": ["act"], "optional": True,
         "trigger": "before_final"},
        {"name": "report", "instructions": "Say what was done.", "after": ["act"]},
    ],
    "vars": {},
}

MODEL_CFG: dict[str, Any] = {"route": "sim/small", "temperature": 0.0}


def configs() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return copy.deepcopy(AGENT_CFG), copy.deepcopy(TOOL_CFG), copy.deepcopy(MODEL_CFG)
