"""The first turn's rendering of a task's tools: nothing of a schema the model needs is lost, and
no JSON quoting is left for a chat template to escape. Run with verifiers' venv:
`PYTHONPATH=python/netdojo_verifiers "$(bash .ci/verifiers)/python" -m unittest discover -s python/netdojo_verifiers/tests`."""

import unittest

from netdojo_verifiers import first_turn, next_turn, parse_action, schema_text, tools_text

TOOLS = [
    {
        "name": "find_nodes",
        "description": "List nodes by kind.",
        "input_schema": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "description": "only nodes of this kind (EK_*)"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "page size"},
                "offset": {"type": "integer", "minimum": 0},
            },
            "required": [],
        },
    },
    {
        "name": "update_node",
        "description": "Set one attribute of a node.",
        "input_schema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "node name"},
                "value": {"type": ["integer", "string", "boolean"]},
                "mode": {"enum": ["set", "add"]},
            },
            "required": ["name", "value"],
        },
    },
    {
        "name": "batch",
        "description": "Several calls at once.",
        "input_schema": {
            "type": "object",
            "properties": {
                "calls": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
                        "required": ["tool", "arguments"],
                    },
                }
            },
            "required": ["calls"],
        },
    },
    {"name": "finish", "description": "Done.", "input_schema": {"type": "object", "properties": {}}},
]


class ToolsText(unittest.TestCase):
    def test_every_tool_is_one_line_with_its_arguments_types_bounds_and_descriptions(self):
        self.assertEqual(
            tools_text(TOOLS).splitlines(),
            [
                "- find_nodes(kind?: string (only nodes of this kind (EK_*)), "
                "limit?: integer 1..200 (page size), offset?: integer 0..): List nodes by kind.",
                '- update_node(name: string (node name), value: integer|string|boolean, mode?: "set"|"add"): '
                "Set one attribute of a node.",
                "- batch(calls: [{tool: string, arguments: object}, ...] 1..): Several calls at once.",
                "- finish(): Done.",
            ],
        )

    def test_a_construct_it_cannot_shorten_is_given_whole(self):
        schema = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        self.assertEqual(schema_text(schema), '{"anyOf": [{"type": "string"}, {"type": "integer"}]}')

    def test_the_shared_part_comes_before_the_brief(self):
        turn = first_turn({"brief": "Query: count the racks.", "tools": TOOLS})
        self.assertTrue(turn.startswith("Answer each turn with exactly one JSON object"))
        self.assertTrue(turn.endswith("\n\nQuery: count the racks."))
        self.assertIn(tools_text(TOOLS), turn)


class ParseAction(unittest.TestCase):
    def test_a_fenced_json_action_is_a_call(self):
        reply = '```json\n{"tool_name": "finish", "arguments": {"answer": 4}}\n```'
        self.assertEqual(parse_action(reply), {"tool_name": "finish", "arguments": {"answer": 4}})

    def test_anything_else_is_a_call_of_a_tool_named_by_the_reply(self):
        self.assertEqual(parse_action("I think 4"), {"tool_name": "I think 4", "arguments": {}})
        self.assertEqual(parse_action("  "), {"tool_name": "(empty)", "arguments": {}})


class NextTurn(unittest.TestCase):
    def test_a_result_comes_back_with_its_tool_and_status(self):
        step = {"observation": {"tool_name": "get_node", "result": {"data": "no node `x`", "is_error": True}}}
        self.assertEqual(next_turn(step), "[get_node failed]\nno node `x`")
        step = {"observation": {"tool_name": "capacity", "result": {"data": "400", "is_error": False}}}
        self.assertEqual(next_turn(step), "[capacity ok]\n400")


if __name__ == "__main__":
    unittest.main()
