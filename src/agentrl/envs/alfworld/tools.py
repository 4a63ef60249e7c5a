"""The ALFWorld tool protocol: one tool, `alfworld_step(action: str)`. Pure text.

The agent sees the whole history of its own calls and the environment's answers. The system
prompt asks for one call per turn, instance names copied exactly (`apple 1`) and never to
declare the task done itself; the first user message and each tool message carry a status
line, a step counter, the observation and (optionally) the admissible commands without `help`.
No textworld or alfworld import: this module is text only.
"""

from __future__ import annotations

from agentrl.tools import CommandTool, StatusTexts
from agentrl.tools.command import PlainCommandProtocol

__all__ = [
    "ALFWORLD_MOVES",
    "ALFWORLD_PLAIN_SYSTEM_PROMPT",
    "ALFWORLD_SYSTEM_PROMPT",
    "ALFWORLD_TOOL_DESCRIPTION",
    "ALFWORLD_TOOL_NAME",
    "alfworld_plain_protocol",
    "alfworld_tool_protocol",
]

ALFWORLD_TOOL_NAME = "alfworld_step"

ALFWORLD_TOOL_DESCRIPTION = (
    "Execute one text command in the ALFWorld household and return what happens. "
    "Command forms: go to RECEPTACLE; open RECEPTACLE; close RECEPTACLE; "
    "take OBJECT from RECEPTACLE; move OBJECT to RECEPTACLE; heat OBJECT with RECEPTACLE; "
    "cool OBJECT with RECEPTACLE; clean OBJECT with RECEPTACLE; use OBJECT; "
    "examine OBJECT_OR_RECEPTACLE; look; inventory. Names are instances with their number, "
    "e.g. 'take apple 1 from countertop 2', 'heat apple 1 with microwave 1', "
    "'move apple 1 to fridge 1'."
)

ALFWORLD_SYSTEM_PROMPT = (
    "You are a household agent in a text world. You act only by calling the "
    f"{ALFWORLD_TOOL_NAME} tool, and you see the result of every call.\n"
    "Rules:\n"
    "- Make exactly one tool call per turn, at the very end of your reply.\n"
    "- Copy object and receptacle names exactly as written, with their numbers "
    "(for example 'apple 1', 'countertop 2').\n"
    "- Choose commands from the available actions whenever they are listed.\n"
    "- Never declare the task complete yourself: the environment tells you when it is done."
)


def alfworld_tool_protocol(*, include_admissible: bool = True) -> CommandTool:
    """The `alfworld_step` protocol; `include_admissible` lists executable commands each turn."""
    return CommandTool(
        name=ALFWORLD_TOOL_NAME,
        description=ALFWORLD_TOOL_DESCRIPTION,
        system_prompt=ALFWORLD_SYSTEM_PROMPT,
        parameter="action",
        parameter_description=(
            "One ALFWorld command with full instance names, e.g. 'go to countertop 1'."
        ),
        include_admissible=include_admissible,
        hidden_actions=frozenset({"help"}),
        status=StatusTexts(
            won="Status: completed successfully. The task is done.",
            ended="Status: the episode ended without success.",
            invalid_format=(
                "Status: invalid tool-call format ({detail}). The environment state was not "
                f"advanced. End your reply with exactly one {ALFWORLD_TOOL_NAME} call."
            ),
            not_admissible=(
                "Status: action not admissible: {action!r} cannot be executed here; "
                "nothing changed."
            ),
            executed="Status: executed {action!r}.",
        ),
    )


ALFWORLD_PLAIN_SYSTEM_PROMPT = "Reply with one command."


ALFWORLD_MOVES = ("go to ",)
"""The commands that move between receptacles (named in the first observation)."""


def alfworld_plain_protocol(
    restate_task: bool = False, include_admissible: bool = False, list_moves: bool = True
) -> PlainCommandProtocol:
    """ALFWorld for small models trained from scratch: the reply is the command itself, no
    tool markup, no action lists and no step counter; each tool message is the observation,
    after a short status line only when the turn was not simply executed (an explorer episode
    of small-room "put" games: 430 tokens against about 1,000 with the tool protocol). With
    `restate_task` every tool message also repeats the goal (`Task: ...`) before the
    observation, as verl-agent's ALFWorld prompt does. With `include_admissible` every
    message lists the executable commands (the env leaves `help` out) before the
    observation, as the recipe's optional lists do; without `list_moves` the lists leave out
    the `go to` commands (`ALFWORLD_MOVES`: the same receptacles every turn, named in the first
    observation), showing only what can be done where the agent stands."""
    return PlainCommandProtocol(
        system_prompt=ALFWORLD_PLAIN_SYSTEM_PROMPT,
        include_admissible=include_admissible,
        unlisted_prefixes=() if list_moves else ALFWORLD_MOVES,
        show_steps=False,
        restate_task=restate_task,
        status=StatusTexts(
            won="Status: won.",
            ended="Status: ended.",
            invalid_format="Status: invalid ({detail}).",
            not_admissible="Status: not admissible.",
            executed="",
        ),
    )
