"""Member-facing words: labels and help text the pages show instead of stored codes."""

from __future__ import annotations

# The member's memory actions (memory/views.py, templates/memory/): forgetting, undo,
# step-up, guesses, conflict questions and scope moves. Keys are stable names; a scope
# move is keyed by its rule's reason code (memory.rules.scopes).
MEMORY_ACTIONS: dict[str, str] = {
    # forgetting and undo
    "forget": "Forget",
    "forget_topic": "Forget a topic",
    "forget_everything": "Forget everything",
    "forget_topic_button": "Forget every memory about this topic",
    "forget_everything_button": "Forget everything Iris remembers",
    "forgotten_heading": "Recently forgotten",
    "forgotten_help": (
        "Forgotten memories are no longer used. You can bring one back until its undo "
        "date; after that its text is erased for good."
    ),
    "undo": "Undo",
    "undo_done": "Brought back. The assistant may use it again.",
    "undo_too_late": "Too late to undo: this memory's text is erased for good.",
    "nothing_forgotten": "Nothing was forgotten recently.",
    # step-up
    "step_up_label": "Your password",
    "step_up_help": (
        "Forgetting a whole topic or everything needs your password again, so nobody "
        "else at your screen can do it."
    ),
    "step_up_fresh": "You confirmed your password a moment ago; no need to enter it again.",
    "step_up_wrong": "That password is not right. Nothing was forgotten.",
    "step_up_missing": "Enter your password to go on. Nothing was forgotten.",
    # guesses
    "guess_heading": "Iris guessed this",
    "guess_help": (
        "The assistant inferred this from your conversations. It is not used until you "
        "confirm it. Confirm it, correct it in your own words, or reject it."
    ),
    "confirm": "Confirm",
    "correct": "Correct",
    "reject": "Reject",
    "confirmed": "Confirmed. Iris now remembers it as something you confirmed.",
    "rejected": "Rejected. The assistant will not use this guess.",
    "correct_heading": "Correct a guess",
    "correct_help": (
        "What you write here replaces the guess and is kept as something you said. "
        "Earlier versions stay in its history."
    ),
    "correct_button": "Save as what I said",
    # conflict questions
    "question_heading": "Should Iris update this?",
    "answer_update": "Update it",
    "answer_keep": "Keep what Iris has",
    # scope moves (by reason code)
    "promote-session-to-profile": "About you, in all conversations",
    "promote-session-to-notebook": "A notebook",
    "demote-profile-to-notebook": "A notebook",
    "promote-notebook-to-profile": "Back to about you, in all conversations",
    "tenant-read-only-copy": "A read-only copy in one of your notebooks",
    "move_heading": "Move it",
    "move_button": "Move",
    "notebook_existing": "Notebook",
    "notebook_new": "Or name a new notebook",
    "no_moves": "Memories of this kind stay where they are.",
    # a revision's state in the history table (by lifecycle)
    "state-draft": "Not confirmed",
    "state-active": "In use",
    "state-paused": "Paused",
    "state-superseded": "Replaced by a later version",
    "state-tombstoned": "Forgotten",
    # where a memory came from (by provenance kind)
    "source-session-turn": "A conversation",
    "source-session-summary": "A summary of a conversation",
    "source-profile-promotion": "Moved to about you",
    "source-manual-import": "An import",
    "source-inference-batch": "The assistant's inferences",
    "source-notebook-attachment": "Copied into a notebook",
    "source-scene-event": "A Living Scene",
    "source-pose-sample": "A pose sample",
    "read_only_copy": (
        "This is your read-only copy of something your organisation shares. It cannot be "
        "moved or changed; forget it if you no longer want it."
    ),
}
