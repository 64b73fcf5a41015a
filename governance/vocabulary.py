"""What members read: one place for the words of every value a member page shows.

A member reads "Forgotten" and "Money worries", never `tombstoned` or
`financial_distress`. Every enum a member page shows has its labels (and, where a label is
not enough, a short help text) here, keyed by the enum's string value: this module sits in
the lowest app layer and imports nothing from the apps, so every app can read it, and
`tests/governance/test_vocabulary.py` checks it covers each app's enums in full.
Pages use it through the `words` template filter (`governance.templatetags.vocabulary`);
`dsar.wording` and `inspection.wording` read their shared tables from here.

Plain Python, no Django (an import-linter contract holds that).
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------------ topics


@dataclass(frozen=True)
class Topic:
    label: str
    what: str  # what Iris may remember under it, completing "Iris may remember ..."
    group: str  # a TOPIC_GROUPS key


@dataclass(frozen=True)
class TopicGroup:
    label: str
    explanation: str
    sensitive: bool


# Topics are grouped by theme so that close topics (Money and Money worries) sit side by
# side under one heading, each with the sentence that tells them apart.
TOPIC_GROUPS: dict[str, TopicGroup] = {
    "everyday": TopicGroup(
        "Everyday life",
        "What the assistant needs to know you: not sensitive, no extra consent needed.",
        sensitive=False,
    ),
    "health": TopicGroup(
        "Health and body",
        "Your body, your care and how you feel. Each switch covers one kind of health information.",
        sensitive=True,
    ),
    "money": TopicGroup(
        "Money",
        "Everyday money and money trouble are separate, so you can allow one without the other.",
        sensitive=True,
    ),
    "law": TopicGroup(
        "Law",
        "Ordinary legal matters, trouble with the law and immigration are separate, so you "
        "can allow one without the others.",
        sensitive=True,
    ),
    "beliefs": TopicGroup(
        "Beliefs",
        "Religion is kept apart from wider spiritual life, so you can hold back one and "
        "allow the other.",
        sensitive=True,
    ),
    "intimate": TopicGroup(
        "Sex, orientation and gender",
        "Each is separate: allowing one says nothing about the others.",
        sensitive=True,
    ),
    "safety": TopicGroup(
        "Safety",
        "Threats to your safety and what you have been through. The assistant can use them "
        "to help you in a crisis.",
        sensitive=True,
    ),
}

TOPICS: dict[str, Topic] = {
    "fact": Topic("Facts about you", "facts about you, such as where you live", "everyday"),
    "preference": Topic("Likes and preferences", "what you like and how you like it", "everyday"),
    "goal": Topic("Goals", "what you are working towards", "everyday"),
    "relationship": Topic("People in your life", "the people you mention", "everyday"),
    "commitment": Topic("Plans and promises", "plans you made and promises you gave", "everyday"),
    "identity": Topic("Who you are", "how you describe yourself", "everyday"),
    "spatial": Topic("Places", "places that matter to you", "everyday"),
    "work": Topic("Work", "your job and your work", "everyday"),
    "family": Topic("Family", "your family", "everyday"),
    "other": Topic("Everything else", "anything that fits no other topic", "everyday"),
    "physical_health": Topic("Physical health", "illnesses, injuries, fitness and sleep", "health"),
    "mental_health": Topic("Mental health", "your mood, stress, and mental health", "health"),
    "medical": Topic("Medical care", "diagnoses, treatments, medicines and appointments", "health"),
    "biometric": Topic("Biometric data", "measurements of your body, such as heart rate", "health"),
    "pose_alignment": Topic(
        "Body movement and posture",
        "how you move and hold your body in Living Scenes (the assistant's 3D scenes)",
        "health",
    ),
    "substance_use": Topic(
        "Alcohol and drugs", "your use of alcohol, drugs or medicines", "health"
    ),
    "financial": Topic("Money", "your income, spending and accounts", "money"),
    "financial_distress": Topic("Money worries", "debts or money trouble you are facing", "money"),
    "legal": Topic("Legal matters", "contracts, disputes and other legal matters", "law"),
    "legal_jeopardy": Topic(
        "Legal trouble", "situations that could get you into trouble with the law", "law"
    ),
    "immigration_status": Topic("Immigration status", "your visa, residence or citizenship", "law"),
    "spiritual": Topic("Spiritual life", "your spiritual life and practices", "beliefs"),
    "religion_user_redacted": Topic("Religion or belief", "your religion or beliefs", "beliefs"),
    "sexual": Topic("Sex life", "your sex life", "intimate"),
    "sexuality": Topic("Sexual orientation", "your sexual orientation", "intimate"),
    "gender_identity": Topic("Gender identity", "your gender identity", "intimate"),
    "safety": Topic("Personal safety", "threats to your safety and how you stay safe", "safety"),
    "abuse_history": Topic("Experiences of abuse", "abuse you have lived through", "safety"),
    "relationship_violence": Topic(
        "Violence in a relationship",
        "violence or control by a partner or family member",
        "safety",
    ),
}

TOPIC_LABELS: dict[str, str] = {code: t.label for code, t in TOPICS.items()}


def topic_choices() -> list[tuple[str, list[tuple[str, str]]]]:
    """Topics for a <select>, grouped under their theme (Django's grouped choices)."""
    return [
        (group.label, [(code, t.label) for code, t in TOPICS.items() if t.group == key])
        for key, group in TOPIC_GROUPS.items()
    ]


# ------------------------------------------------------------------------ memory

# Canonical scope kinds: where a memory lives.
SCOPE_LABELS: dict[str, str] = {
    "profile": "About you",
    "session": "From a conversation",
    "notebook": "Notebooks",
    "operator-copilot": "Notes by support staff",
    "tenant": "Shared by your organisation",
    "scene": "Living Scenes",
    "pose": "Pose samples",
    "crisis": "Crisis support",
}

SCOPE_HELP: dict[str, str] = {
    "profile": "Kept between conversations, so the assistant knows you next time.",
    "session": "Kept for one conversation only.",
    "notebook": "Kept in a notebook you named, used only when you open it.",
    "operator-copilot": "Written by support staff while helping you.",
    "tenant": "Shared by your organisation with its members.",
    "scene": "What happened in a Living Scene, the assistant's 3D scenes.",
    "pose": "How you moved in a Living Scene, as totals.",
    "crisis": "Kept while the assistant helps you through a crisis.",
}

ORIGIN_LABELS: dict[str, str] = {
    "user-stated": "You said",
    "user-confirmed": "You confirmed",
    "model-inferred": "Guessed",
    "operator-copilot": "Staff note",
    "summarized-from-session": "Summary",
    "imported": "Imported",
}

ORIGIN_HELP: dict[str, str] = {
    "user-stated": "You told the assistant this.",
    "user-confirmed": "The assistant guessed it and you confirmed it.",
    "model-inferred": "The assistant guessed it. It is not used until you confirm it.",
    "operator-copilot": "Support staff noted it while helping you.",
    "summarized-from-session": "Summed up from one of your conversations.",
    "imported": "Brought in from a copy of your data.",
}

LIFECYCLE_LABELS: dict[str, str] = {
    "draft": "Not confirmed",
    "active": "In use",
    "paused": "Paused",
    "superseded": "An earlier version",
    "tombstoned": "Forgotten",
}

LIFECYCLE_HELP: dict[str, str] = {
    "draft": "The assistant does not use it until you confirm it.",
    "active": "The assistant may use it where it is relevant.",
    "paused": "Kept, but the assistant does not use it until you resume it.",
    "superseded": "Replaced by a newer version; kept so you can see what changed.",
    "tombstoned": "The assistant no longer uses it; its text is erased for good after a "
    "grace period.",
}

# Why a memory is held back from the assistant (the entry's suppression reason).
SUPPRESSION_LABELS: dict[str, str] = {
    "user-pause": "You paused it",
    "crisis-frame": "Held back while the assistant helps you through a crisis",
    "sensitive-category": "Held back because its topic is sensitive",
    "tenant-quarantine": "Held back by your organisation while it is checked",
}

# Where a memory came from, one step of its provenance.
PROVENANCE_LABELS: dict[str, str] = {
    "session-turn": "Something you said in a conversation",
    "session-summary": "A summary of a conversation",
    "profile-promotion": "Kept from a conversation for the long term",
    "manual-import": "Imported by you",
    "inference-batch": "Guessed by the assistant",
    "notebook-attachment": "Attached to a notebook",
    "scene-event": "Something that happened in a Living Scene",
    "pose-sample": "How you moved in a Living Scene",
}

# What a conversation was about when the assistant recalled a memory.
RECALL_CONTEXT_LABELS: dict[str, str] = {
    "general": "an everyday",
    "health": "a health",
    "identity": "a personal",
    "financial": "a money",
    "legal": "a legal",
    "relationship": "a relationship",
    "spiritual": "a spiritual",
    "safety": "a safety",
    "crisis": "a crisis",
}

# The apps that use Iris, by their surface name.
SURFACE_LABELS: dict[str, str] = {
    "assistant": "the assistant",
    "tara": "Tara",
    "arete": "Arete",
    "veritas": "Veritas",
    "nyx": "Nyx",
    "nisaba": "Nisaba",
    "metis": "Metis",
    "studio": "Studio",
    "shell": "the assistant's shell",
    "notebook": "your notebook",
    "admin": "our staff",
}

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
    "read_only_copy": (
        "This is your read-only copy of something your organisation shares. It cannot be "
        "moved or changed; forget it if you no longer want it."
    ),
}

# ------------------------------------------------------------------------ consent


@dataclass(frozen=True)
class Copy:
    """Plain words for one consent or opt-out: its name, what it allows, what withdrawing
    it does to memory."""

    label: str
    unlocks: str
    revoking: str


CONSENT_COPY: dict[str, Copy] = {
    "data_processing": Copy(
        "Use what you say to answer you",
        "The assistant may use what you tell it in a conversation to help you. Without it, "
        "Iris keeps nothing at all, not even for the conversation in front of you.",
        "Every kind of memory switches off. Nothing is deleted: delete memories from My "
        "memory, or ask for erasure under Data rights.",
    ),
    "data_storage": Copy(
        "Remember between conversations",
        "Iris may keep memories after a conversation ends, so the assistant knows you next "
        "time. Without it, memory lasts only as long as the conversation.",
        "Long-term memory switches off and conversations are no longer kept. Nothing is "
        "deleted: you can delete what is already kept from My memory.",
    ),
    "sensitive_data": Copy(
        "Sensitive data in general",
        "Iris may handle sensitive data at all; remembering how you move in Living Scenes "
        "needs it. Each sensitive topic below still stays off until you switch it on.",
        "Iris stops remembering how you move in Living Scenes. Nothing is deleted.",
    ),
    "cross_device": Copy(
        "Continue on your other devices",
        "A conversation you start on one device may carry on another, including sensitive "
        "topics you have switched on.",
        "Conversations still move between devices, but never carry sensitive topics. "
        "Nothing is deleted.",
    ),
    "multi_actor_sensitive": Copy(
        "Sensitive moments involving other people",
        "Iris may remember sensitive things that happened between you and people you "
        "mention. Those people are kept only as masked references, never as profiles.",
        "Every memory of a sensitive moment involving someone else is deleted, whatever "
        "its topic, with the summaries made from it.",
    ),
}


def topic_copy(category: str) -> Copy:
    """The consent switch of one sensitive topic, short: it sits in a list of them."""
    topic = TOPICS[category]
    return Copy(
        topic.label,
        f"Iris may remember {topic.what}.",
        f"Everything Iris remembers about {topic.label.lower()} is deleted.",
    )


OPT_OUT_COPY: dict[str, Copy] = {
    "personalization": Copy(
        "Personalisation",
        "The assistant adapts to your preferences and interests.",
        "Profile and topic memory pause until you switch personalisation back on.",
    ),
    "session_memory": Copy(
        "Memory within a conversation",
        "The assistant remembers what was said earlier in the same conversation.",
        "Each message is answered on its own.",
    ),
    "long_term_memory": Copy(
        "Long-term memory",
        "Iris keeps memories from one conversation to the next.",
        "Long-term memory pauses; what is kept stays until you delete it.",
    ),
    "cross_device_sync": Copy(
        "Sync between devices",
        "A conversation can move from one of your devices to another.",
        "Conversations stay on the device where they started.",
    ),
    "embodied_memory": Copy(
        "Scene and pose memory",
        "Living Scenes remember the scene and how you moved in it.",
        "Scene and pose memory pause.",
    ),
    "operator_copilot": Copy(
        "Support assistant memory",
        "Support staff's assistant may remember your past support conversations.",
        "Support starts each conversation without that memory.",
    ),
    "tenant_sharing": Copy(
        "Shared organisation memory",
        "Memory your organisation shares with its members may include what you add.",
        "Nothing you add joins your organisation's shared memory.",
    ),
}

# How a consent event was recorded, completing "How: ...".
CAPTURE_LABELS: dict[str, str] = {
    "inline-prompt": "when the assistant asked",
    "settings-toggle": "on this page",
    "dsar-import": "recorded by Iris, not by you: brought in from another record or set up "
    "with your account",
    "operator-recorded": "recorded by staff, with a witness",
}

CONSENT_STATUS_LABELS: dict[str, str] = {
    "granted": "Given",
    "revoked": "Withdrawn",
    "opted-out": "Switched off",
    "opted-in": "Switched back on",
}

LEGAL_BASIS_LABELS: dict[str, str] = {
    "consent": "Your consent",
    "explicit_consent": "Your explicit consent",
    "contract": "Our contract with you",
    "legal_obligation": "A legal obligation",
    "vital_interests": "To protect someone's life",
    "public_task": "A task in the public interest",
    "legitimate_interests": "Legitimate interests",
}

# The adapter's policy scopes, as the consent page's "what is switched on now" names them.
POLICY_SCOPE_LABELS: dict[str, str] = {
    "assistant_profile": "What the assistant knows about you",
    "session": "Memory within a conversation",
    "scene": "Living Scenes: what happened in a scene",
    "pose": "Living Scenes: how you moved",
    "conversation": "Your conversation history",
    "domain": "What each app knows about you",
    "cross_domain": "What your apps share with each other",
    "notebook": "Your notebooks",
    "operator_copilot": "Support staff's assistant",
    "tenant": "Memory shared by your organisation",
    "admin_review": "When our staff review your memory",
}

POLICY_MODE_LABELS: dict[str, str] = {
    "durable": "On, kept between conversations",
    "ephemeral": "On, for the current conversation only",
    "suppressed": "Off",
}

# ------------------------------------------------------------------ data rights

DATA_RIGHTS_KIND_LABELS: dict[str, str] = {
    "export": "A copy of your data",
    "delete": "Deletion of your data",
    "access": "A view of everything Iris holds about you",
}

DATA_RIGHTS_STATE_LABELS: dict[str, str] = {
    "submitted": "Waiting for you to confirm it is you",
    "verified": "Confirmed, about to start",
    "in-progress": "In progress",
    "completed": "Done",
    "failed": "Could not be done",
    "cancelled": "Cancelled",
    "expired": "Closed: not confirmed in time",
    "appealed": "Being looked at again",
}

# ------------------------------------------------------------------ inspection

# Why someone at the company looked, as the member reads it.
INSPECTION_PATH_LABELS: dict[str, str] = {
    "routine-review": "A routine check, for example to answer a question you asked support",
    "dsar-fulfillment": "To answer a data-rights request you made",
    "incident-escalation": "To investigate a safety or abuse report",
}

INSPECTION_NOTICE_LABELS: dict[str, str] = {
    "not-required": "No notice needed: no sensitive memory was seen",
    "queued": "We will tell you by email within 72 hours",
    "sending": "We will tell you by email within 72 hours",
    "delivered": "You were told",
}

# ------------------------------------------------------------------ refusals


@dataclass(frozen=True)
class Refusal:
    """A refusal as the member reads it, and the page (a URL name) that is the way out."""

    text: str
    way_out: str | None = None
    way_out_label: str = ""


REFUSALS: dict[str, Refusal] = {
    "sensitive-category-without-consent": Refusal(
        "You have not switched this topic on, so Iris may not keep memories about it.",
        "consent:home",
        "Switch the topic on in your consent settings",
    ),
    "scope-suppressed": Refusal(
        "A consent you withdrew or a feature you switched off keeps Iris from using this "
        "kind of memory.",
        "consent:home",
        "See what is switched on in your consent settings",
    ),
    "consumer-not-allowed": Refusal("This app may not use this kind of memory."),
    "owner-approval-required": Refusal(
        "This waits for your approval.", "approvals", "Answer it in your approvals"
    ),
    "secret-in-memory": Refusal(
        "That looks like a password or key. Iris never keeps those: leave it out and try again."
    ),
    "forgotten-not-recreated": Refusal(
        "You asked Iris to forget this, so it will not be remembered again."
    ),
}


def refusal(code: str | None) -> Refusal | None:
    return REFUSALS.get(code or "")


# ------------------------------------------------------------------ lookups

# Every table a template may name with the `words` filter, by the name it uses.
TABLES: dict[str, dict[str, str]] = {
    "topic": TOPIC_LABELS,
    "scope": SCOPE_LABELS,
    "origin": ORIGIN_LABELS,
    "lifecycle": LIFECYCLE_LABELS,
    "suppression": SUPPRESSION_LABELS,
    "provenance": PROVENANCE_LABELS,
    "recall_context": RECALL_CONTEXT_LABELS,
    "surface": SURFACE_LABELS,
    "capture": CAPTURE_LABELS,
    "consent_status": CONSENT_STATUS_LABELS,
    "legal_basis": LEGAL_BASIS_LABELS,
    "policy_scope": POLICY_SCOPE_LABELS,
    "policy_mode": POLICY_MODE_LABELS,
    "data_rights_kind": DATA_RIGHTS_KIND_LABELS,
    "data_rights_state": DATA_RIGHTS_STATE_LABELS,
    "inspection_path": INSPECTION_PATH_LABELS,
    "inspection_notice": INSPECTION_NOTICE_LABELS,
}

HELP_TABLES: dict[str, dict[str, str]] = {
    "scope": SCOPE_HELP,
    "origin": ORIGIN_HELP,
    "lifecycle": LIFECYCLE_HELP,
    "topic": {code: f"Iris may remember {t.what}." for code, t in TOPICS.items()},
}

UNKNOWN = "Other"


def label(table: str, value: object) -> str:
    """The member's word for `value` of `table`; never the raw value itself."""
    return TABLES[table].get(str(value), UNKNOWN)


def help_text(table: str, value: object) -> str:
    return HELP_TABLES.get(table, {}).get(str(value), "")
