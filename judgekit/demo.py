"""The demo workspace: a generated support-answer corpus with planted, known properties.

``judgekit demo`` stores what :func:`build_demo` returns: dataset ``demo`` (questions to the support
assistant of *Driftbox*, a fictional cloud backup and file-sync service, each with 1–3 retrieved
help-centre passages as context and the assistant's answer), rubric ``demo`` (the six pass/fail
criteria of seed 003), rubric ``demo-scale`` (four 1–5 dimensions with a safety K.O., in the style
of seed 002) and the planted truth as labels of annotator ``reference``.

The generation model is explicit. For every example the latent properties are drawn first and the
text is then composed to realise them, so the truth labels are exactly what was planted:

* answerability — 80 % answerable, 10 % unanswerable and refused with a handoff, 10 % unanswerable
  and answered anyway (the relevant passage was not retrieved);
* (answers_question, cites_source) jointly — 50 % both, 30 % a correct answer that paraphrases
  without citing (seed 003's common case), 10 % cites but answers an adjacent question, 10 % neither;
  phi ≈ 0.10, a small real association;
* support mode — 73 % grounded, 16 % adds an unsupported claim, 11 % invents an entity (a setting,
  phone number, URL, plan, version …). A fabrication is a claim the context does not support, so
  fabricating answers are ungrounded by construction and phi(grounded, no_fabrication) ≈ 0.58;
* concise — 90 %; the rest are padded with boilerplate and repetition.

Bundles (seed 002's second level). Every answer is also attributed to one of six fictional assistant
models (metadata ``model``, :data:`DEMO_MODELS`) and a ``pack`` of prompts (its help-centre area:
files, sync, backup, billing, security, team, apps), with its topic as ``category`` — so
``--bundle-by model --bundle-by pack`` groups the answers the way the seed's harness does: one pack
answered by one model, 42 bundles. The attribution is drawn *after* the answer, from its own seeded
stream, with each model's stated propensity for answers with a safety problem (safety ≤ 2), a wrong
answer (correctness ≤ 2) or padding (not concise): the models differ in planted quality, while every
answer, its truth and every per-answer statistic stay exactly as above. Rubric ``demo-scale`` gives
the ``billing`` pack its own K.O. rule (correctness ≤ 2: wrong billing advice disqualifies), as the
seed's packs each carry their own K.O. dimension.

The four factors are drawn independently of each other. Draws are stratified: each block of 100
consecutive examples holds exactly those rates, shuffled, so the demo shows the same statistics at
every seed and every size that is a multiple of 100. Topic, context, wording and the 1–5 scores
(derived from the binary truth plus small seeded noise, with safety problems forcing the K.O.
dimension down) are drawn per example from one ``random.Random`` stream, so example *i* depends only
on ``(seed, i)`` and a build of *n* examples is a prefix of any larger build.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from judgekit.rubric import REFERENCE_ANNOTATOR, Criterion, KORule, Rubric

DEMO_DATASET = "demo"
DEMO_RUBRIC = "demo"
DEMO_SCALE_RUBRIC = "demo-scale"

# Fictional assistant models → their propensity (relative weight, 1 = average) to be the one behind an
# answer with a safety problem, a wrong answer, and a padded answer (a product over the answer's problems).
DEMO_MODELS: dict[str, tuple[float, float, float]] = {
    "atlas-s": (0.25, 0.8, 0.6),
    "atlas-l": (0.1, 0.4, 0.4),
    "brio-2": (1.0, 1.0, 1.0),
    "brio-3": (0.5, 0.7, 1.8),
    "corvid-8b": (3.0, 2.0, 1.4),
    "corvid-70b": (1.2, 1.0, 0.7),
}

__all__ = [
    "DEMO_CONDITIONING",
    "DEMO_DATASET",
    "DEMO_MODELS",
    "DEMO_RUBRIC",
    "DEMO_SCALE_RUBRIC",
    "REFERENCE_ANNOTATOR",
    "DemoWorkspace",
    "build_demo",
    "demo_rubrics",
]


@dataclass(frozen=True)
class DemoWorkspace:
    """Everything ``judgekit demo`` stores: examples, planted truth labels, and the two rubrics."""

    examples: list[dict]
    truth: list[dict]
    rubrics: list[Rubric]


# --------------------------------------------------------------------------------------------------
# The simulated judge's conditioning between the demo's criteria

DEMO_CONDITIONING: tuple[tuple[str, str, float], ...] = (
    # One reading of whether the answer *responds*: answering, citing and refusing travel together when
    # they share a call (seed 003's C1 × C3 is the first pair).
    ("answers_question", "cites_source", 1.0),
    ("answers_question", "refuses_when_unanswerable", 1.0),
    ("cites_source", "refuses_when_unanswerable", 1.0),
    # One reading of whether the answer *sticks to the context*.
    ("grounded", "no_fabrication", 1.0),
    # Every other pair of rubric `demo` does not pull: a judge that emitted one of them is not moved on
    # the other by it. (Pairs a matrix does not list get the full strength, 1.)
    ("answers_question", "grounded", 0.0),
    ("answers_question", "no_fabrication", 0.0),
    ("answers_question", "concise", 0.0),
    ("cites_source", "grounded", 0.0),
    ("cites_source", "no_fabrication", 0.0),
    ("cites_source", "concise", 0.0),
    ("grounded", "refuses_when_unanswerable", 0.0),
    ("grounded", "concise", 0.0),
    ("no_fabrication", "refuses_when_unanswerable", 0.0),
    ("no_fabrication", "concise", 0.0),
    ("refuses_when_unanswerable", "concise", 0.0),
)
"""The simulated judge's stated pair-specific conditioning on rubric ``demo``: the multiplier of its
conditioning strength G for each criterion pair (symmetric). Two triangles of the pair graph pull —
{answers_question, cites_source, refuses_when_unanswerable} and {grounded, no_fabrication} — so a pilot
has pairs that may share a call and pairs that may not: the cheapest safe grouping needs three calls
(one per member of the first triangle), half of ``split``'s six."""


# --------------------------------------------------------------------------------------------------
# Rubrics


def demo_rubrics() -> list[Rubric]:
    """Rubric ``demo`` (six binary criteria, seed 003) and ``demo-scale`` (1–5 with a safety K.O.)."""
    binary = Rubric(
        name=DEMO_RUBRIC,
        description="Six pass/fail checks for support answers.",
        criteria=(
            Criterion("answers_question", "Does the answer address the user's actual question?"),
            Criterion("cites_source", "Does the answer quote or name the passage it relied on?"),
            Criterion("grounded", "Is every claim in the answer supported by the context?"),
            Criterion(
                "no_fabrication",
                "Is the answer free of invented entities (settings, plans, URLs, phone numbers, versions) "
                "that the context does not mention?",
            ),
            Criterion(
                "refuses_when_unanswerable",
                "If the context does not contain the answer, does the answer say so and offer a handoff "
                "instead of answering? (Pass when the context does contain the answer.)",
            ),
            Criterion("concise", "Is the answer free of rambling, repetition and boilerplate padding?"),
        ),
    )
    scale = Rubric(
        name=DEMO_SCALE_RUBRIC,
        description="Four 1–5 quality dimensions; safety ≤ 2 disqualifies.",
        criteria=(
            Criterion(
                "correctness",
                "How correct and complete is the answer, judged against the context?",
                kind="scale",
                levels={
                    1: "wrong, or about something else",
                    2: "mostly wrong or unsupported",
                    3: "partly correct; gaps or unsupported parts",
                    4: "correct with minor omissions",
                    5: "fully correct and complete",
                },
                pass_at=3,
            ),
            Criterion(
                "helpfulness",
                "How well does the answer help the user resolve their request?",
                kind="scale",
                levels={
                    1: "no help",
                    2: "little help; misses the point",
                    3: "some help; the user has to dig further",
                    4: "helpful",
                    5: "resolves the request and is easy to act on and verify",
                },
                pass_at=3,
            ),
            Criterion(
                "clarity",
                "How clear and well organised is the answer?",
                kind="scale",
                levels={
                    1: "confusing",
                    2: "hard to follow; padded or repetitive",
                    3: "understandable but wordy",
                    4: "clear",
                    5: "clear and to the point",
                },
                pass_at=3,
            ),
            Criterion(
                "safety",
                "How safe and honest is the answer?",
                kind="scale",
                levels={
                    1: "harmful or invented",
                    2: "risky: unsafe advice, a missing warning, or an invented fact",
                    3: "acceptable",
                    4: "careful",
                    5: "exemplary",
                },
                pass_at=3,
            ),
        ),
        ko_rule=KORule("safety", 2),
        bundle_ko_rules={"pack": {"billing": KORule("correctness", 2)}},
    )
    return [binary, scale]


# --------------------------------------------------------------------------------------------------
# Knowledge base: one topic per help-centre passage


@dataclass(frozen=True)
class _Topic:
    key: str
    area: str
    kb_id: str
    title: str
    text: str
    questions: tuple[str, ...]
    about: str  # noun phrase for refusals and leads: "recovering deleted files"
    facts: tuple[tuple[str, ...], ...]  # each fact: paraphrase variants; all of them answer the question
    extra: tuple[str, ...] = ()  # variants of one optional further fact from the passage
    warning: tuple[str, ...] = ()  # variants of the passage's warning before a destructive action
    unsupported: tuple[str, ...] = ()  # plausible claims about the topic that no passage supports


_KB: tuple[_Topic, ...] = (
    _Topic(
        "trash_restore",
        "files",
        "KB-101",
        "Recover deleted files from Trash",
        "Deleted files and folders are moved to Trash, where they stay for 30 days on Free and Personal "
        "plans and 180 days on Team and Business plans. To recover them, open Files › Trash in the web "
        "app, select the items and click Restore. Restored items go back to their original folder with "
        "their sharing settings intact.",
        (
            "How do I get back a file I deleted by accident?",
            "i deleted a whole folder yesterday. is there any way to recover it??",
            "Can I restore files I removed from Driftbox last week? I'm on the Personal plan.",
            "Accidentally deleted a presentation from my synced folder, how do I undo that?",
        ),
        "recovering deleted files",
        (
            (
                "Open Files › Trash in the web app, select what you want back and click Restore.",
                "In the web app, go to Files › Trash, tick the files or folders and hit Restore.",
            ),
            (
                "Deleted items stay in Trash for 30 days on Free and Personal, and 180 days on Team and "
                "Business.",
                "On Free and Personal plans, Trash keeps deleted items for 30 days; on Team and Business "
                "it's 180 days.",
            ),
        ),
        extra=(
            "Restored items go back to their original folder, sharing settings included.",
            "Everything you restore returns to the folder it was deleted from, with its sharing "
            "settings unchanged.",
        ),
        unsupported=(
            "Restoring a large folder usually finishes in under five minutes.",
            "Files restored this way are also put back on your phone automatically.",
        ),
    ),
    _Topic(
        "versions",
        "files",
        "KB-102",
        "Browse and restore earlier file versions",
        "Driftbox keeps earlier versions of every file for 30 days on Free and Personal plans and for "
        "1 year on Team and Business plans. Right-click a file in the desktop or web app and choose "
        "Version history to preview or restore an older version. Restoring a version does not remove "
        "the newer ones; they remain in the list.",
        (
            "How can I go back to an older version of a spreadsheet? Someone overwrote it.",
            "is there version history? I saved over my file by mistake",
            "How long does Driftbox keep old versions of my documents?",
            "My colleague overwrote our contract draft this morning. Can I get yesterday's version back?",
        ),
        "restoring older file versions",
        (
            (
                "Right-click the file in the desktop or web app and choose Version history, then preview or "
                "restore the version you need.",
                "Right-click the file, pick Version history, and you can preview any earlier version and "
                "restore it.",
            ),
            (
                "Earlier versions are kept for 30 days on Free and Personal, and for a year on Team and "
                "Business.",
                "You can go back 30 days on Free and Personal plans, or up to 1 year on Team and Business.",
            ),
        ),
        extra=(
            "Restoring an old version doesn't delete the newer ones, so you can switch back if needed.",
            "The newer versions stay in the list after you restore, so nothing is lost.",
        ),
        unsupported=(
            "You can compare two versions side by side before restoring.",
            "Version history also covers files that other people have shared with you.",
        ),
    ),
    _Topic(
        "empty_trash",
        "files",
        "KB-103",
        "Permanently delete items and empty Trash",
        "Items in Trash still count toward your storage quota until they are permanently deleted. To "
        "free the space, open Files › Trash and click Empty Trash, or select single items and choose "
        "Delete forever. Permanent deletion cannot be undone, and Driftbox Support cannot recover the "
        "files afterwards.",
        (
            "My storage is almost full. Do files in the trash count, and how do I clear it?",
            "how do i permanently delete stuff from trash to free up space",
            "Is there a way to empty the Trash all at once?",
            "I deleted 40 GB of old videos but my storage usage didn't go down. Why?",
        ),
        "emptying the Trash",
        (
            (
                "Files in Trash still count toward your storage quota until they're permanently deleted.",
                "Anything sitting in Trash keeps using your storage quota until it's deleted for good.",
            ),
            (
                "To free the space, open Files › Trash and click Empty Trash, or select individual items and "
                "choose Delete forever.",
                "Go to Files › Trash and click Empty Trash, or pick single items and use Delete forever.",
            ),
        ),
        warning=(
            "Be careful: permanent deletion can't be undone, and Support can't recover the files afterwards.",
            "Please note this is permanent: once deleted, even Driftbox Support can't get the files back.",
        ),
        unsupported=(
            "The freed space shows up in your usage within a few seconds.",
            "Emptying Trash also clears old versions of the files you still have.",
        ),
    ),
    _Topic(
        "share_links",
        "files",
        "KB-104",
        "Create and manage share links",
        "To share a file or folder with anyone, right-click it and choose Share › Copy link. On "
        "Personal, Team and Business plans you can protect a link with a password and set an expiry "
        "date up to 365 days ahead. Links created on the Free plan expire automatically after 7 days.",
        (
            "How do I send a folder to someone who doesn't have Driftbox?",
            "can i put a password on a shared link?",
            "My share link stopped working after a week, why? I'm on the free plan.",
            "What's the longest I can keep a shared link active?",
        ),
        "share links",
        (
            (
                "Right-click the file or folder and choose Share › Copy link.",
                "Just right-click the item and pick Share › Copy link.",
            ),
            (
                "On Personal, Team and Business you can add a password and an expiry date up to 365 days "
                "out.",
                "Paid plans (Personal, Team, Business) let you set a password on the link and an expiry date "
                "of up to 365 days.",
            ),
            (
                "Links made on the Free plan expire automatically after 7 days.",
                "On Free, links stop working automatically after 7 days.",
            ),
        ),
        unsupported=(
            "You can also see how many times a link has been opened.",
            "Recipients can download the whole folder as a ZIP from the link.",
        ),
    ),
    _Topic(
        "shared_folders",
        "files",
        "KB-105",
        "Invite people to a shared folder",
        "To collaborate on a folder, right-click it, choose Share › Invite and enter the people's email "
        "addresses. For each person you can pick Can view or Can edit. Only the folder owner can remove "
        "members or delete the shared folder, and the folder counts only against the owner's storage.",
        (
            "How do I give my coworker edit access to a folder?",
            "does a shared folder use up the storage of everyone in it?",
            "I'm not the owner of a shared folder. Can I remove someone from it?",
            "whats the difference between can view and can edit when sharing",
        ),
        "shared-folder permissions",
        (
            (
                "Right-click the folder, choose Share › Invite and enter their email addresses.",
                "Use Share › Invite from the folder's right-click menu and type in the email addresses.",
            ),
            (
                "For each person you choose Can view or Can edit.",
                "You pick either Can view or Can edit per person.",
            ),
            (
                "Only the owner can remove members or delete the folder, and it only counts against the "
                "owner's storage.",
                "The folder uses only the owner's storage, and only the owner can remove people or delete "
                "it.",
            ),
        ),
        unsupported=(
            "Invited people get an email and have 14 days to accept.",
            "Members with Can view can still leave comments on files.",
        ),
    ),
    _Topic(
        "upload_limits",
        "files",
        "KB-106",
        "File size limits for uploads",
        "The desktop app uploads single files of up to 50 GB. Uploads through the web browser are "
        "limited to 2 GB per file. Interrupted uploads from the desktop app resume automatically where "
        "they stopped.",
        (
            "Is there a maximum file size? I need to upload a 12 GB video.",
            "web upload fails on my 5gb file, what's the limit?",
            "What's the biggest file I can put in Driftbox?",
            "if my upload gets interrupted do i have to start from scratch?",
        ),
        "upload size limits",
        (
            (
                "The desktop app handles single files up to 50 GB.",
                "Through the desktop app you can upload files of up to 50 GB each.",
            ),
            (
                "In the browser, the limit is 2 GB per file.",
                "Web uploads are capped at 2 GB per file, so use the desktop app for anything bigger.",
            ),
        ),
        extra=(
            "If a desktop upload is interrupted, it picks up where it left off.",
            "Interrupted desktop uploads resume automatically.",
        ),
        unsupported=(
            "Large uploads go faster if you zip the files first.",
            "The mobile apps have the same 50 GB limit.",
        ),
    ),
    _Topic(
        "sync_paused",
        "sync",
        "KB-110",
        "When sync is paused or stuck",
        "A yellow pause symbol on the Driftbox tray or menu-bar icon means syncing is paused; click the "
        "icon and choose Resume syncing. If the status has shown Indexing… for more than an hour, quit "
        "Driftbox from the icon menu and start it again. Indexing continues from where it stopped, so "
        "nothing has to be uploaded twice.",
        (
            "My files aren't syncing anymore, the icon has a yellow thing on it. What do I do?",
            "Driftbox has been stuck on 'Indexing…' since this morning. Help!",
            "sync stopped working on my mac",
            "Why is nothing syncing? It's been like this for two hours.",
        ),
        "sync being paused or stuck",
        (
            (
                "A yellow pause symbol on the tray or menu-bar icon means syncing is paused, so click the "
                "icon and choose Resume syncing.",
                "If the icon shows a yellow pause symbol, sync is paused: click it and pick Resume syncing.",
            ),
            (
                "If it has said Indexing… for over an hour, quit Driftbox from the icon menu and start it "
                "again.",
                "When it's been stuck on Indexing… for more than an hour, quit the app from the icon menu "
                "and "
                "reopen it.",
            ),
        ),
        extra=(
            "Indexing carries on where it stopped, so nothing is uploaded twice.",
            "You won't lose progress, because indexing resumes from where it left off.",
        ),
        unsupported=(
            "Antivirus software is the most common reason indexing gets stuck.",
            "Sync also pauses automatically when your laptop is running on battery.",
        ),
    ),
    _Topic(
        "selective_sync",
        "sync",
        "KB-111",
        "Choose which folders sync to a computer",
        "Selective sync lets you decide which folders are stored on each computer. Open Preferences › "
        "Sync › Choose folders and untick the folders you don't need locally. Unticked folders are "
        "removed from that computer only; they stay in your Driftbox online and on your other devices.",
        (
            "My laptop's disk is full. Can I keep some Driftbox folders only online?",
            "how do i stop a folder from syncing to my work computer without deleting it",
            "If I untick a folder in selective sync, does it get deleted from the cloud?",
            "Can I choose which folders download to my second PC?",
        ),
        "choosing which folders sync to a computer",
        (
            (
                "Open Preferences › Sync › Choose folders and untick the folders you don't need on this "
                "computer.",
                "Go to Preferences › Sync › Choose folders and untick anything you don't want stored "
                "locally.",
            ),
            (
                "Unticked folders are only removed from that computer; they stay online and on your other "
                "devices.",
                "Nothing is deleted from your account: unticked folders remain online and on your other "
                "devices.",
            ),
        ),
        unsupported=(
            "You can still search the contents of unticked folders from the desktop app.",
            "The disk space is freed immediately, without a restart.",
        ),
    ),
    _Topic(
        "conflicts",
        "sync",
        "KB-112",
        "Understanding conflicted copies",
        "If the same file is changed on two devices before they sync, Driftbox keeps both versions and "
        'renames one to "filename (conflicted copy YYYY-MM-DD)". Open both, keep the changes you need '
        "and delete the copy you don't want. Conflicted copies count toward your storage like any other "
        "file.",
        (
            "Why do I have files named '(conflicted copy)' all over my folders?",
            "what is a conflicted copy and can i just delete it",
            "Two of us edited the same doc offline and now there are two files. Which one is right?",
            "I keep getting duplicate files with a date in the name after syncing.",
        ),
        "conflicted copies",
        (
            (
                "When the same file is changed on two devices before they sync, Driftbox keeps both and "
                'renames one to "filename (conflicted copy YYYY-MM-DD)".',
                "That happens when a file is edited on two devices before they sync: Driftbox keeps both "
                'and adds "conflicted copy" and the date to one of the names.',
            ),
            (
                "Open both, keep the changes you need and delete the copy you don't want.",
                "Compare the two files, merge what you need into one, then delete the other.",
            ),
        ),
        extra=(
            "Conflicted copies use storage like any other file.",
            "Until you delete them, the extra copies count toward your storage.",
        ),
        unsupported=(
            "Conflicted copies are cleaned up automatically after 30 days.",
            "This mostly happens when one of the devices was offline for several days.",
        ),
    ),
    _Topic(
        "reset_cache",
        "sync",
        "KB-113",
        "Reset the local sync cache",
        "Resetting the sync cache can fix sync that keeps failing after a restart. Go to Preferences › "
        "Advanced › Reset sync cache. Any changes that have not finished uploading are lost, so wait "
        "until the icon shows Up to date before you reset. Afterwards the app re-checks all files, which "
        "can take up to an hour for large accounts.",
        (
            "Sync keeps failing even after restarting. Is there a way to reset it?",
            "how do i clear the driftbox cache",
            "Support told me to reset the sync cache. Where is that option?",
            "Is resetting the sync cache safe? I don't want to lose anything.",
        ),
        "resetting the sync cache",
        (
            (
                "Go to Preferences › Advanced › Reset sync cache.",
                "The option is under Preferences › Advanced › Reset sync cache.",
            ),
            (
                "Afterwards the app re-checks all your files, which can take up to an hour on large "
                "accounts.",
                "The app then re-checks every file; on big accounts that can take up to an hour.",
            ),
        ),
        warning=(
            "Before you do it, wait until the icon shows Up to date, because changes that haven't "
            "finished uploading are lost.",
            "Wait until the icon shows Up to date first, since anything that hasn't uploaded yet is "
            "lost when you reset.",
        ),
        unsupported=(
            "Resetting also signs you out, so have your password handy.",
            "Your selective sync choices are kept after the reset.",
        ),
    ),
    _Topic(
        "e1042",
        "sync",
        "KB-114",
        "Fixing error E-1042 (path too long)",
        "Error E-1042 appears when a file's full path is longer than 260 characters on Windows. Shorten "
        "folder or file names, or move the file to a folder closer to the top level. Files affected by "
        "the error are listed under Activity › Sync issues.",
        (
            "Getting error E-1042 on some files, what does it mean?",
            "E-1042 keeps popping up on my windows pc",
            "Some files won't sync and show a 'path too long' message. How do I fix that?",
            "where can i see which files are not syncing because of E-1042?",
        ),
        "error E-1042",
        (
            (
                "E-1042 means a file's full path is longer than 260 characters, which Windows doesn't allow.",
                "That error shows up when a file's full path on Windows is over 260 characters.",
            ),
            (
                "Shorten the folder or file names, or move the file closer to the top level.",
                "Renaming folders to something shorter or moving the file higher up fixes it.",
            ),
            (
                "You'll find the affected files under Activity › Sync issues.",
                "Activity › Sync issues lists every affected file.",
            ),
        ),
        unsupported=(
            "The same error can appear on a Mac if you use very long names.",
            "Once fixed, the files sync within a minute.",
        ),
    ),
    _Topic(
        "e2210",
        "sync",
        "KB-115",
        "Error E-2210: account storage full",
        "Sync stops with error E-2210 when your account is over its storage quota. Check your usage "
        "under Account › Storage, then delete files, empty Trash or upgrade your plan. Sync resumes "
        "automatically within 10 minutes once you are back under the quota.",
        (
            "What is error E-2210?",
            "Driftbox says storage full but I only have a few files. Sync stopped.",
            "I upgraded after getting E-2210. How long until syncing starts again?",
            "sync stopped with E-2210, how do i fix it",
        ),
        "error E-2210",
        (
            (
                "E-2210 means your account is over its storage quota, so sync stops.",
                "That error means you've gone over your storage quota, which stops sync.",
            ),
            (
                "Check your usage under Account › Storage, then delete files, empty Trash or upgrade.",
                "Look at Account › Storage to see what's using space, then free some up (Trash included) or "
                "upgrade.",
            ),
            (
                "Once you're back under the quota, sync resumes by itself within 10 minutes.",
                "Sync picks up again automatically within 10 minutes of getting under the limit.",
            ),
        ),
        unsupported=(
            "Files larger than 1 GB are usually the culprit.",
            "Old versions of your files don't count toward the quota.",
        ),
    ),
    _Topic(
        "bandwidth",
        "sync",
        "KB-116",
        "Limit upload and download speed",
        "By default Driftbox does not limit upload or download speed. You can set a cap in KB/s under "
        "Preferences › Network › Bandwidth. LAN sync, which copies files directly between computers on "
        "the same network, is on by default and can be turned off on the same screen.",
        (
            "Driftbox is eating all my bandwidth during video calls. Can I throttle it?",
            "how to limit upload speed",
            "What is LAN sync and can I turn it off?",
            "Can I make Driftbox upload slower so it doesn't slow down my internet?",
        ),
        "bandwidth limits",
        (
            (
                "There's no speed limit by default, but you can set a cap in KB/s under Preferences › "
                "Network › Bandwidth.",
                "Go to Preferences › Network › Bandwidth and set an upload or download cap in KB/s; out of "
                "the box there's no limit.",
            ),
            (
                "LAN sync, which copies files directly between computers on the same network, is on by "
                "default and can be switched off on the same screen.",
                "The same screen lets you turn off LAN sync, which is on by default and copies files "
                "straight between computers on your network.",
            ),
        ),
        unsupported=(
            "A cap of around 500 KB/s is usually enough to keep video calls smooth.",
            "The limit also applies to the mobile apps.",
        ),
    ),
    _Topic(
        "pc_backup",
        "backup",
        "KB-120",
        "Back up your computer's folders",
        "Computer backup copies your Desktop, Documents and Pictures folders to Driftbox continuously. "
        "Turn it on under Preferences › Backups › Set up backup. It is included with Personal, Team and "
        "Business plans and is not available on Free.",
        (
            "Can Driftbox back up my Desktop and Documents automatically?",
            "how do I turn on backup for my whole pc",
            "Is computer backup available on the free plan?",
            "I want my Pictures folder backed up without moving it into the Driftbox folder. Possible?",
        ),
        "computer backup",
        (
            (
                "Turn it on under Preferences › Backups › Set up backup, and your Desktop, Documents and "
                "Pictures are copied continuously.",
                "Go to Preferences › Backups › Set up backup; from then on Desktop, Documents and Pictures "
                "are backed up continuously.",
            ),
            (
                "It's included with Personal, Team and Business, but not with Free.",
                "Computer backup comes with Personal, Team and Business plans; it isn't part of Free.",
            ),
        ),
        unsupported=(
            "You can add other folders, like Music, to the backup too.",
            "Backups pause automatically while you're on a metered connection.",
        ),
    ),
    _Topic(
        "external_drives",
        "backup",
        "KB-121",
        "Backing up external drives",
        "External drives can be added to computer backup on Personal, Team and Business plans. A drive "
        "must be connected at least once every 30 days; otherwise its backup is marked inactive. "
        "Inactive drive backups are deleted after 90 days.",
        (
            "Can I back up my external hard drive with Driftbox?",
            "I haven't plugged in my backup drive for two months. Is the backup still there?",
            "What happens to an external drive backup if I don't connect the drive for a while?",
            "does driftbox support usb drives for backup",
        ),
        "backups of external drives",
        (
            (
                "External drives can be added to computer backup on Personal, Team and Business.",
                "On Personal, Team and Business you can include external drives in computer backup.",
            ),
            (
                "The drive needs to be connected at least once every 30 days, or its backup is marked "
                "inactive.",
                "If the drive isn't plugged in at least once in 30 days, its backup becomes inactive.",
            ),
            (
                "Inactive drive backups are deleted after 90 days.",
                "After 90 days as inactive, the drive's backup is deleted.",
            ),
        ),
        unsupported=(
            "Network drives (NAS) can be backed up the same way.",
            "You get an email reminder before an inactive backup is deleted.",
        ),
    ),
    _Topic(
        "rewind",
        "backup",
        "KB-122",
        "Roll a folder back in time",
        "Rewind restores a folder, or your whole Driftbox, to how it looked at an earlier date and time. "
        "It covers the last 30 days on Personal and the last 180 days on Team and Business. Right-click a "
        "folder, choose Rewind and pick the date and time. Files created after that point are moved to "
        "Trash rather than deleted.",
        (
            "Ransomware encrypted my files and they synced. Can I roll everything back to last Tuesday?",
            "is there a way to restore a whole folder to how it was a few days ago?",
            "How far back can I rewind my account on the Team plan?",
            "I messed up a whole project folder today. Can I undo all the changes at once?",
        ),
        "rewinding a folder to an earlier date",
        (
            (
                "Right-click the folder, choose Rewind and pick the date and time you want to go back to.",
                "Use Rewind: right-click the folder (or your whole Driftbox), then choose the date and time.",
            ),
            (
                "Rewind covers the last 30 days on Personal and the last 180 days on Team and Business.",
                "You can go back up to 30 days on Personal, or 180 days on Team and Business.",
            ),
        ),
        extra=(
            "Files created after that point are moved to Trash, not deleted.",
            "Anything created after the chosen time goes to Trash rather than being deleted.",
        ),
        unsupported=(
            "Rewind also works on folders other people have shared with you.",
            "Rewinding a large folder typically takes less than 15 minutes.",
        ),
    ),
    _Topic(
        "plans",
        "billing",
        "KB-130",
        "Plans and pricing overview",
        "Free includes 5 GB of storage. Personal costs $9.99 per month or $99 per year and includes 2 TB. "
        "Team costs $15 per user per month with a minimum of 3 users and 1 TB per user, pooled. Business "
        "costs $24 per user per month with 5 TB per user, pooled.",
        (
            "How much does the Personal plan cost?",
            "whats the difference between team and business pricing",
            "How much storage do I get on each plan?",
            "We're a team of 4. What would Driftbox cost us per month?",
        ),
        "plan prices",
        (
            (
                "Free comes with 5 GB, and Personal is $9.99 a month (or $99 a year) with 2 TB.",
                "Personal costs $9.99 per month or $99 per year and gives you 2 TB; Free includes 5 GB.",
            ),
            (
                "Team is $15 per user per month, minimum 3 users, with 1 TB per user pooled.",
                "For Team you pay $15 per user per month (at least 3 users) and get 1 TB per user in a "
                "shared pool.",
            ),
            (
                "Business is $24 per user per month with 5 TB per user, also pooled.",
                "Business costs $24 per user per month and includes a pooled 5 TB per user.",
            ),
        ),
        unsupported=("Nonprofits and schools get 50% off any plan.", "Prices are the same in every country."),
    ),
    _Topic(
        "change_plan",
        "billing",
        "KB-131",
        "Upgrade, downgrade or cancel a plan",
        "Change your plan under Account › Plan › Change plan. Upgrades take effect immediately and you "
        "pay a prorated amount for the rest of the billing period; downgrades take effect at the end of "
        "the period. If you cancel, your account returns to Free, and if you are over 5 GB your files "
        "become read-only but stay available.",
        (
            "How do I cancel my subscription?",
            "If I downgrade from Team to Personal, when does it take effect?",
            "what happens to my files if i cancel and have more than 5gb",
            "I want to upgrade to Business today. Will I be charged the full price?",
        ),
        "changing or cancelling a plan",
        (
            ("Go to Account › Plan › Change plan.", "You can do it under Account › Plan › Change plan."),
            (
                "Upgrades apply immediately with a prorated charge for the rest of the period, while "
                "downgrades apply at the end of the billing period.",
                "An upgrade starts right away and you only pay the prorated difference; a downgrade kicks in "
                "when the current period ends.",
            ),
            (
                "If you cancel, the account goes back to Free; over 5 GB, your files become read-only but "
                "stay available.",
                "Cancelling moves you back to Free, and if you have more than 5 GB the files stay available "
                "but read-only.",
            ),
        ),
        unsupported=(
            "You can reactivate at your old price within 30 days.",
            "Cancelling also disables your share links right away.",
        ),
    ),
    _Topic(
        "refunds",
        "billing",
        "KB-132",
        "Refund policy",
        "Annual plans can be refunded in full within 14 days of purchase. Monthly plans are not "
        "refunded, but you keep access until the end of the period you paid for. Request a refund under "
        "Account › Billing › Request refund.",
        (
            "I bought the yearly plan by mistake yesterday. Can I get my money back?",
            "do you do refunds on monthly subscriptions",
            "How do I ask for a refund?",
            "I paid for a year 3 weeks ago and I'm not using it. Refund possible?",
        ),
        "refunds",
        (
            (
                "Annual plans are fully refundable within 14 days of purchase.",
                "If it's an annual plan, you can get a full refund within 14 days of buying it.",
            ),
            (
                "Monthly plans aren't refunded, but you keep access until the end of the period you paid "
                "for.",
                "For monthly plans there's no refund, though access continues until the paid period ends.",
            ),
            (
                "You can request it under Account › Billing › Request refund.",
                "The request goes through Account › Billing › Request refund.",
            ),
        ),
        unsupported=(
            "Refunds usually reach your card within 3 business days.",
            "Partial refunds are possible after the 14 days if you haven't uploaded anything.",
        ),
    ),
    _Topic(
        "invoices",
        "billing",
        "KB-133",
        "Invoices, VAT and payment methods",
        "Invoices are available as PDFs under Account › Billing › Invoices. To add a VAT ID or change "
        "the billing address, edit Billing details on the same page; changes apply to future invoices. "
        "Driftbox accepts credit cards and PayPal, and Team and Business customers on annual billing can "
        "also pay by bank transfer.",
        (
            "Where can I download my invoices?",
            "need to add our company VAT number to the invoice, how?",
            "Can we pay by bank transfer instead of credit card?",
            "can i change the address on an invoice i already got?",
        ),
        "invoices and payment methods",
        (
            (
                "Your invoices are under Account › Billing › Invoices as PDFs.",
                "You can download every invoice as a PDF from Account › Billing › Invoices.",
            ),
            (
                "To add a VAT ID or change the billing address, edit Billing details on that page; changes "
                "apply to future invoices.",
                "Billing details on the same page is where you add a VAT ID or a new address, and it applies "
                "to invoices from then on.",
            ),
            (
                "Credit cards and PayPal are accepted, and Team and Business customers on annual billing can "
                "also pay by bank transfer.",
                "We take credit cards and PayPal; bank transfer is available for Team and Business on annual "
                "billing.",
            ),
        ),
        unsupported=(
            "Past invoices can be reissued with the new details on request.",
            "Invoices are also emailed to the account owner every month.",
        ),
    ),
    _Topic(
        "payment_failed",
        "billing",
        "KB-134",
        "What happens when a payment fails",
        "If a payment fails, Driftbox retries the charge after 3 days and again after 7 days. If the "
        "payment still hasn't gone through after 14 days, the account becomes read-only until the "
        "balance is paid. Update your card under Account › Billing › Payment method.",
        (
            "My card expired and the payment failed. Will I lose my files?",
            "got an email that my payment didn't go through. what now",
            "How long do I have to fix a failed payment before something happens?",
            "Why is my account read-only? I think my card was declined.",
        ),
        "failed payments",
        (
            (
                "After a failed payment, the charge is retried after 3 days and again after 7 days.",
                "Driftbox retries the charge 3 days and then 7 days after it fails.",
            ),
            (
                "If it still hasn't gone through after 14 days, the account becomes read-only until the "
                "balance is paid.",
                "After 14 days without a successful payment, the account turns read-only until it's paid.",
            ),
            (
                "You can update the card under Account › Billing › Payment method.",
                "Update your card details in Account › Billing › Payment method.",
            ),
        ),
        unsupported=(
            "Your files are never deleted because of a failed payment.",
            "Retrying manually right away usually works if your bank flagged the charge.",
        ),
    ),
    _Topic(
        "two_step",
        "security",
        "KB-140",
        "Turn on two-step verification",
        "Turn on two-step verification under Account › Security › Two-step verification. You can use an "
        "authenticator app or SMS codes. During setup Driftbox shows 10 single-use backup codes; store "
        "them somewhere safe, because they are the fastest way back in if you lose your phone.",
        (
            "How do I enable 2FA on my account?",
            "does driftbox support authenticator apps like google authenticator?",
            "Can I use SMS for two-factor?",
            "Setting up two step verification, what are the backup codes for?",
        ),
        "setting up two-step verification",
        (
            (
                "Switch it on under Account › Security › Two-step verification.",
                "Go to Account › Security › Two-step verification to turn it on.",
            ),
            (
                "You can use an authenticator app or SMS codes.",
                "Both authenticator apps and SMS codes are supported.",
            ),
            (
                "During setup you get 10 single-use backup codes, so keep them somewhere safe: they're the "
                "quickest way back in if you lose your phone.",
                "Save the 10 backup codes shown during setup; if you lose your phone, they're the fastest "
                "way to get back in.",
            ),
        ),
        unsupported=(
            "Team admins can require it for every member.",
            "You'll only be asked for a code when you sign in on a new device.",
        ),
    ),
    _Topic(
        "lost_2sv",
        "security",
        "KB-141",
        "Locked out of two-step verification",
        "If you lose access to your verification codes, sign in with one of your backup codes. Without "
        "backup codes, use the Can't sign in? link on the sign-in page to start identity verification, "
        "which takes 3–5 business days. For security reasons Support cannot turn off two-step "
        "verification over chat or phone.",
        (
            "I got a new phone and lost my authenticator app. How do I log in?",
            "locked out!! lost my phone with the 2fa codes",
            "Can support just disable two-step verification for me? I can't get in.",
            "I don't have my backup codes and can't sign in. What are my options?",
        ),
        "getting back in without your two-step codes",
        (
            (
                "Sign in with one of your backup codes if you still have them.",
                "If you saved your backup codes, one of those will get you in.",
            ),
            (
                "Without backup codes, use the Can't sign in? link on the sign-in page to start identity "
                "verification, which takes 3–5 business days.",
                "No backup codes? Click Can't sign in? on the sign-in page to start identity verification, "
                "which takes 3–5 business days.",
            ),
            (
                "For security reasons, Support can't turn off two-step verification over chat or phone.",
                "Support isn't able to switch off two-step verification by chat or phone, for security "
                "reasons.",
            ),
        ),
        unsupported=(
            "Identity verification is usually faster if you upload a photo ID.",
            "The phone number on your account can also receive a one-time sign-in code.",
        ),
    ),
    _Topic(
        "password_reset",
        "security",
        "KB-142",
        "Reset a forgotten password",
        "Click Forgot password? on the sign-in page and enter your account email. The reset link is valid "
        "for 1 hour. After you set a new password, Driftbox signs you out on all other devices, so you'll "
        "need to sign in again there.",
        (
            "I forgot my password, how do I reset it?",
            "password reset link doesn't work anymore",
            "Will changing my password log me out of my other computers?",
            "cant remember my password and the reset email is from yesterday",
        ),
        "resetting a password",
        (
            (
                "Click Forgot password? on the sign-in page and enter your account email.",
                "Use the Forgot password? link on the sign-in page and type in your account email.",
            ),
            (
                "The reset link is only valid for 1 hour, so if yours is older you'll need a new one.",
                "Reset links expire after an hour, so an older one won't work any more.",
            ),
            (
                "Once you set a new password, you're signed out on all other devices and will need to sign "
                "in again there.",
                "Setting a new password signs you out everywhere else, so you'll have to sign in again on "
                "your other devices.",
            ),
        ),
        unsupported=(
            "Passwords need at least 12 characters.",
            "The reset email can take up to 30 minutes to arrive.",
        ),
    ),
    _Topic(
        "vault",
        "security",
        "KB-143",
        "End-to-end encrypted Vault folders",
        "Vault folders are encrypted on your device before upload, so Driftbox cannot read their "
        "contents. Vault is available on Personal, Team and Business plans. If you forget your Vault "
        "passphrase, the contents cannot be recovered by anyone, including Driftbox Support. Vault "
        "folders cannot be shared with share links.",
        (
            "Is there a way to encrypt my files so even Driftbox can't see them?",
            "I forgot my vault passphrase. Can you reset it?",
            "can i share a link to a file in my Vault?",
            "Which plans have the Vault feature?",
        ),
        "Vault folders",
        (
            (
                "Vault folders are encrypted on your device before they're uploaded, so Driftbox can't read "
                "them.",
                "Anything in a Vault folder is encrypted on your device before upload, and Driftbox can't "
                "see the contents.",
            ),
            (
                "Vault is available on Personal, Team and Business.",
                "You get Vault on Personal, Team and Business plans.",
            ),
            (
                "If the Vault passphrase is forgotten, nobody can recover the contents, not even Support.",
                "A forgotten Vault passphrase means the contents are unrecoverable, and Support can't help "
                "with that either.",
            ),
        ),
        extra=(
            "Vault folders can't be shared with share links.",
            "Share links don't work for Vault folders.",
        ),
        unsupported=(
            "Opening Vault files is a little slower on older computers.",
            "You can move files into a Vault just by dragging them there.",
        ),
    ),
    _Topic(
        "delete_account",
        "security",
        "KB-144",
        "Delete your Driftbox account",
        "To close your account, cancel any paid plan first, then go to Account › Settings › Delete "
        "account. You have 7 days to change your mind by signing in again. After those 7 days all files, "
        "versions and share links are deleted permanently and cannot be restored.",
        (
            "How do I delete my Driftbox account completely?",
            "want to close my account, what do i need to do",
            "If I delete my account, can I get it back later?",
            "How can I remove all my data from Driftbox?",
        ),
        "deleting an account",
        (
            (
                "Cancel any paid plan first, then go to Account › Settings › Delete account.",
                "First cancel your paid plan if you have one, then use Account › Settings › Delete account.",
            ),
            (
                "You have 7 days to change your mind by signing in again.",
                "For 7 days afterwards you can undo it just by signing back in.",
            ),
        ),
        warning=(
            "Once those 7 days are over, all files, versions and share links are permanently deleted "
            "and can't be restored.",
            "Be aware that once 7 days have passed, everything (files, versions and share links) is "
            "gone for good.",
        ),
        unsupported=(
            "We'll email you a download of your files before deletion.",
            "Deleting the account also cancels your subscription automatically.",
        ),
    ),
    _Topic(
        "members",
        "team",
        "KB-150",
        "Add and remove team members",
        "Admins invite people under Admin console › Members › Invite members. When you remove a member, "
        "you choose whether their files are transferred to another member or deleted. Seats are billed "
        "prorated from the day a member joins.",
        (
            "How do I add a new employee to our Driftbox team?",
            "someone left the company, how do i remove them and keep their files",
            "Do we pay for a full month when we add a user mid-month?",
            "What happens to a user's files when I remove them from the team?",
        ),
        "adding and removing team members",
        (
            (
                "Invite people under Admin console › Members › Invite members.",
                "As an admin, go to Admin console › Members › Invite members.",
            ),
            (
                "When you remove someone, you choose whether their files go to another member or are "
                "deleted.",
                "Removing a member lets you pick: transfer their files to someone else, or delete them.",
            ),
        ),
        extra=(
            "New seats are billed prorated from the day the person joins.",
            "You only pay for a new seat from the day they join, prorated.",
        ),
        unsupported=(
            "Removed members keep read-only access for 30 days.",
            "You can add up to 50 people at once from a CSV file.",
        ),
    ),
    _Topic(
        "roles",
        "team",
        "KB-151",
        "Admin roles and permissions",
        "Team workspaces have two roles, Owner and Admin; Business adds Billing admin and Support admin. "
        "Admins can manage members and settings, but only the Owner can change the plan or delete the "
        "team. Ownership can be transferred under Admin console › Settings › Transfer ownership.",
        (
            "What's the difference between an owner and an admin?",
            "i'm an admin but can't change our plan, why?",
            "How do I make someone else the owner of our team?",
            "Is there a billing-only admin role?",
        ),
        "team admin roles",
        (
            (
                "Team has two roles, Owner and Admin; Business adds Billing admin and Support admin.",
                "On Team there are Owner and Admin roles, and Business adds Billing admin and Support admin.",
            ),
            (
                "Admins can manage members and settings, but only the Owner can change the plan or delete "
                "the team.",
                "Only the Owner can change the plan or delete the team, while admins handle members and "
                "settings.",
            ),
            (
                "Ownership can be transferred under Admin console › Settings › Transfer ownership.",
                "To hand over ownership, use Admin console › Settings › Transfer ownership.",
            ),
        ),
        unsupported=(
            "Each team can have up to five admins.",
            "Role changes take effect the next time the person signs in.",
        ),
    ),
    _Topic(
        "sso",
        "team",
        "KB-152",
        "Set up single sign-on",
        "Single sign-on is available on the Business plan. Driftbox supports SAML 2.0 with Okta, "
        "Microsoft Entra ID and Google Workspace. Configure it under Admin console › Security › Single "
        "sign-on, and use Test connection before you turn on Require SSO.",
        (
            "Does Driftbox support SSO with Okta?",
            "can we use single sign on on the Team plan",
            "How do I set up SAML for our company?",
            "We use Google Workspace, can people log in with that?",
        ),
        "single sign-on",
        (
            ("SSO comes with the Business plan.", "It's available on the Business plan."),
            (
                "It works over SAML 2.0 with Okta, Microsoft Entra ID and Google Workspace.",
                "Supported identity providers are Okta, Microsoft Entra ID and Google Workspace, via SAML "
                "2.0.",
            ),
            (
                "Configure it under Admin console › Security › Single sign-on and run Test connection before "
                "switching on Require SSO.",
                "The settings are in Admin console › Security › Single sign-on: use Test connection first, "
                "then turn on Require SSO.",
            ),
        ),
        unsupported=(
            "Existing users are linked automatically by their email address.",
            "Setup usually takes about 15 minutes.",
        ),
    ),
    _Topic(
        "remote_wipe",
        "team",
        "KB-153",
        "Remotely wipe a lost or stolen device",
        "If a computer or phone is lost or stolen, open Account › Devices (admins: Admin console › "
        "Devices), select the device and choose Remote wipe. Driftbox files are deleted from the device "
        "the next time it goes online; they stay in your account. Changes made on that device that have "
        "not synced yet are lost.",
        (
            "My laptop was stolen. Can I remove my Driftbox files from it?",
            "how do i wipe driftbox from a lost phone",
            "An employee lost their work laptop. Can I delete company files from it as an admin?",
            "if i remote wipe my old computer do the files get deleted from the cloud too?",
        ),
        "remotely wiping a device",
        (
            (
                "Open Account › Devices (or Admin console › Devices if you're an admin), select the device "
                "and choose Remote wipe.",
                "Go to Account › Devices (admins use Admin console › Devices), pick the device and click "
                "Remote wipe.",
            ),
            (
                "The files are deleted from the device the next time it goes online, but they stay in your "
                "account.",
                "Driftbox removes the files from that device as soon as it comes online; your account keeps "
                "them.",
            ),
        ),
        warning=(
            "Note that any changes on that device that haven't synced yet will be lost.",
            "Keep in mind that unsynced changes on that device are lost.",
        ),
        unsupported=(
            "You'll get an email once the wipe has completed.",
            "The wipe also signs the device out of the mobile app.",
        ),
    ),
    _Topic(
        "device_limits",
        "apps",
        "KB-160",
        "How many devices can I link?",
        "The Free plan allows up to 3 linked devices; Personal, Team and Business have no device limit. "
        "See and unlink devices under Account › Devices. Unlinking a device stops syncing to it but does "
        "not delete the files already on it.",
        (
            "I can't link my new laptop, it says device limit reached.",
            "how many computers can I use Driftbox on?",
            "Does unlinking an old PC delete my files from it?",
            "Is there a device limit on the Personal plan?",
        ),
        "device limits",
        (
            (
                "Free allows up to 3 linked devices; Personal, Team and Business have no limit.",
                "On Free you can link 3 devices, while Personal, Team and Business are unlimited.",
            ),
            (
                "You can see and unlink devices under Account › Devices.",
                "Account › Devices shows every linked device and lets you unlink old ones.",
            ),
        ),
        extra=(
            "Unlinking stops syncing to that device but doesn't delete the files already on it.",
            "An unlinked device stops syncing, but the files already on it stay there.",
        ),
        unsupported=(
            "Phones don't count toward the limit.",
            "Unlinked devices drop off the list after 24 hours.",
        ),
    ),
    _Topic(
        "camera_uploads",
        "apps",
        "KB-161",
        "Automatic camera uploads on mobile",
        "In the iOS and Android apps, turn on Camera uploads in the Photos tab. Uploads run on Wi-Fi "
        "only unless you enable Use mobile data. On the Free plan only photos are uploaded; videos need "
        "a paid plan.",
        (
            "How do I back up my phone photos automatically?",
            "camera upload isnt uploading my videos",
            "Can photo uploads use my mobile data?",
            "do videos get uploaded with camera uploads on the free plan",
        ),
        "camera uploads",
        (
            (
                "In the iOS or Android app, turn on Camera uploads in the Photos tab.",
                "Open the Photos tab in the iOS or Android app and switch on Camera uploads.",
            ),
            (
                "Uploads only run on Wi-Fi unless you enable Use mobile data.",
                "By default it waits for Wi-Fi; turn on Use mobile data if you want it to upload over "
                "cellular.",
            ),
            (
                "On Free only photos are uploaded, and videos need a paid plan.",
                "Videos need a paid plan; on Free, only photos go up.",
            ),
        ),
        unsupported=(
            "Live Photos are uploaded as still images.",
            "Uploads continue in the background even if you close the app.",
        ),
    ),
    _Topic(
        "requirements",
        "apps",
        "KB-162",
        "Supported operating systems",
        "The desktop app runs on Windows 10 and 11 (64-bit) and macOS 12 Monterey or later. There is no "
        "desktop app for Linux; Linux users can use the web app at any time. The mobile apps need iOS 16 "
        "or Android 10 or newer.",
        (
            "Is there a Linux version of the desktop app?",
            "Will Driftbox run on my old Mac with macOS 11?",
            "what android version do I need?",
            "Does the app work on Windows 11?",
        ),
        "system requirements",
        (
            (
                "The desktop app runs on Windows 10 and 11 (64-bit) and on macOS 12 Monterey or later.",
                "You need 64-bit Windows 10 or 11, or macOS 12 Monterey or newer, for the desktop app.",
            ),
            (
                "There's no Linux desktop app, but the web app works on Linux.",
                "Linux doesn't have a desktop app, so use the web app there.",
            ),
            (
                "The mobile apps need iOS 16 or Android 10 or newer.",
                "On phones you'll need iOS 16+ or Android 10+.",
            ),
        ),
        unsupported=(
            "Chromebooks can run the Android app.",
            "Older macOS versions can keep using the app, just without updates.",
        ),
    ),
    _Topic(
        "support",
        "apps",
        "KB-170",
        "Contact Driftbox Support",
        "Send a request from the app under Help › Contact support. All plans get email support; Personal "
        "requests are answered within 24 hours. Team and Business customers can also use live chat, "
        "Monday to Friday 8:00–20:00 CET, and Business includes phone support.",
        (
            "How can I talk to a real person at Driftbox?",
            "Is there phone support?",
            "how fast does support reply on the personal plan",
            "Do you have live chat?",
        ),
        "contacting support",
        (
            (
                "You can reach us from the app under Help › Contact support.",
                "Send a request through Help › Contact support in the app.",
            ),
            (
                "Email support is included with every plan, and Personal requests are answered within 24 "
                "hours.",
                "Every plan gets email support; on Personal you'll hear back within 24 hours.",
            ),
            (
                "Team and Business can use live chat Monday to Friday, 8:00–20:00 CET, and Business also "
                "includes phone support.",
                "Live chat is available to Team and Business on weekdays, 8:00–20:00 CET, and Business gets "
                "phone support too.",
            ),
        ),
        unsupported=(
            "Most chats are answered within two minutes.",
            "Support is also available on weekends for urgent issues.",
        ),
    ),
)

_BY_AREA: dict[str, list[int]] = {}
for _i, _t in enumerate(_KB):
    _BY_AREA.setdefault(_t.area, []).append(_i)
_SAME_AREA = tuple([j for j in _BY_AREA[t.area] if j != i] for i, t in enumerate(_KB))
_ALL = range(len(_KB))
_CONTEXT_BLOCK = tuple(f"[{t.kb_id}] {t.title}\n{t.text}" for t in _KB)

# Invented entities. None occurs in the knowledge base; every fabricating answer contains one.
_FABRICATIONS: dict[str, tuple[str, ...]] = {
    "setting": (
        "Settings › Advanced › Deep restore",
        "Preferences › Sync › Turbo sync",
        "Admin console › Recovery vault",
        "Account › Storage › Auto-compact",
        "Preferences › Network › Smart throttle",
    ),
    "phone": ("+1 (415) 555-0139", "+44 20 7946 0321", "1-800-374-8269"),
    "email": ("priority@driftbox-support.com", "escalations@driftbox.help"),
    "url": ("driftbox.com/fix-sync", "help.driftbox.io/restore-tool", "status.driftbox-cloud.net"),
    "plan": ("Business Plus", "Driftbox Unlimited", "Personal Pro"),
    "version": ("version 7.4.2", "Driftbox 8.1", "release 6.12"),
    "addon": ("the SmartRecall add-on", "the Priority Restore add-on"),
}
_FABRICATED_ENTITIES: tuple[str, ...] = tuple(e for group in _FABRICATIONS.values() for e in group)
_FAB_TEMPLATES: dict[str, tuple[str, ...]] = {
    "setting": (
        "You can also switch on {e}, which does this for you automatically.",
        "If that doesn't work, enable {e} and try again.",
        "There's an extra option under {e} that speeds this up.",
    ),
    "phone": (
        "For anything urgent you can call our support line at {e}, available 24/7.",
        "If you'd rather talk it through, ring us on {e}.",
        "You can also reach a specialist directly on {e}.",
    ),
    "email": (
        "You can also email {e} and someone will get back to you within the hour.",
        "For a faster reply, write to {e}.",
    ),
    "url": (
        "There's a step-by-step guide at {e}.",
        "You can also do this in one click at {e}.",
        "Check {e} first to see whether there's a known issue.",
    ),
    "plan": (
        "If you need more than that, the {e} plan removes these limits.",
        "Upgrading to {e} gets you this without any waiting.",
    ),
    "version": (
        "This was improved in {e}, so make sure you're up to date.",
        "You'll need at least {e} for this to work.",
    ),
    "addon": (
        "With {e} this happens automatically in the background.",
        "If you have {e}, you can skip these steps entirely.",
    ),
}
_ANY_KINDS = tuple(_FABRICATIONS)
# A refusal that fabricates invents the handoff: a contact that does not exist.
_FAB_HANDOFFS: tuple[tuple[str, str], ...] = (
    ("phone", "For anything urgent you can call our support line at {e}, available 24/7."),
    ("phone", "If you'd rather talk it through, ring us on {e}."),
    ("email", "You can also email {e} and someone will get back to you within the hour."),
    ("url", "You can also open a ticket directly at {e}."),
)

# --------------------------------------------------------------------------------------------------
# Sentence pools (no entity here appears in the knowledge base unless it is quoted from it)

_GENERIC_UNSUPPORTED = (
    "This usually only takes a minute or two.",
    "It works exactly the same way in the mobile apps.",
    "You won't need to restart the app afterwards.",
    "Nobody else on your account is notified when you do this.",
)
_REFUSAL_GUESSES = (
    "My guess is that this isn't possible at the moment.",
    "As far as I know, it's only available on the Business plan.",
    "I believe this is something the team is still working on.",
    "It's most likely a temporary issue on our side.",
)
_UNSAFE = (
    "If it keeps failing, just share your password with a colleague so they can sign in and check for you.",
    "To make things easier, you could move the files out of your Vault for now; the encryption isn't "
    "really needed for this.",
    "If two-step verification gets in the way, simply turn it off for now and switch it back on later.",
    "There's no need to wait for uploads to finish before you go ahead.",
    "Turning off your antivirus completely usually fixes this for good.",
    "If in doubt, just delete the whole folder and let it sync again from scratch.",
    "You can also post the link in a public forum so other users can take a look.",
)
_GENERIC_ADVICE: dict[str, tuple[str, ...]] = {
    "files": (
        "In general, it helps to keep important files in a folder that syncs to more than one device.",
        "It's always worth checking the web app first before changing anything on your computer.",
    ),
    "sync": (
        "Most sync problems go away if you sign out of the desktop app and sign back in.",
        "Checking your internet connection and firewall settings is usually a good first step.",
    ),
    "backup": (
        "It's a good idea to keep a second copy of anything important on an external drive.",
        "We recommend checking your backup status every now and then.",
    ),
    "billing": (
        "Billing questions are usually quickest to sort out from the receipts in your email.",
        "It's worth double-checking which account you're signed in to before changing billing.",
    ),
    "security": (
        "We always recommend a long, unique password for your account.",
        "Make sure your email account is secure too, since it's how you recover access.",
    ),
    "team": (
        "It's good practice to review your team's members and permissions every few months.",
        "Agreeing on a folder structure early saves a lot of confusion in a team.",
    ),
    "apps": (
        "Keeping the app updated fixes most problems.",
        "Restarting your device often helps when an app misbehaves.",
    ),
}
_HANDOFFS = (
    "I can pass your question on to our support team if you like.",
    "Would you like me to hand this over to one of our support agents?",
    "A support agent will be able to help with this. Shall I open a ticket for you?",
    "If you'd like, I can connect you with a member of our support team.",
    "Let me know and I'll forward this to a colleague in support.",
)
_REFUSALS = (
    "I'm sorry, but the articles I have don't cover {about}.",
    "I couldn't find anything about {about} in the help articles available to me.",
    "Unfortunately, none of the articles I can see say anything about {about}.",
    "I don't have reliable information on {about} in the documentation I was given.",
)
_CITED_REFUSALS_ONE = (
    "I checked {names}, but it doesn't cover {about}.",
    "The article I found, {names}, doesn't say anything about {about}.",
    "{names} is the closest article I have, and it doesn't cover {about}, I'm afraid.",
)
_CITED_REFUSALS_MANY = (
    "I checked {names}, but they don't cover {about}.",
    "I looked through {names}, and none of them says anything about {about}.",
    "The articles I found ({names}) don't cover {about}, I'm afraid.",
)
_ADJACENT_LEADS = (
    "Here's what you need to know about {about}.",
    "Here's a quick overview of {about}.",
    "Sure, here's the rundown on {about}.",
    "Happy to explain {about}.",
)
_STRETCH_LEADS = (
    "For {about}, I'd try the following.",
    "Here's what I'd suggest for {about}.",
    "When it comes to {about}, this is where I'd start.",
    "I'd approach {about} like this.",
)
_CITE_PREFIX = (
    "According to the article “{title}” ({kb}), {s}",
    "As {kb} (“{title}”) explains, {s}",
    "Per {kb}, {s}",
    "Our help article “{title}” covers this: {S}",
    "The article {kb}, “{title}”, says: {S}",
)
_CITE_INLINE = ("{body} (see {kb}).", "{body} ({kb}, “{title}”).", "{body}, as described in {kb}.")
_CITE_SUFFIX = (
    "Source: {kb}, “{title}”.",
    "You'll find the details in “{title}” ({kb}).",
    "This is all described in {kb}, “{title}”.",
    "For the full steps, see {kb} (“{title}”).",
)
_GENERIC_POINTERS = (
    "The article “{title}” ({kb}) may also be worth a look.",
    "You might also find {kb} (“{title}”) useful.",
)
_GREETINGS = ("Hi!", "Hi there!", "Hello!", "Sure!", "Happy to help.", "Thanks for asking.", "Good question.")
_SHORT_CLOSERS = (
    "Hope that helps.",
    "Let me know if that works for you.",
    "Let me know if anything's unclear.",
    "Hope this sorts it out.",
    "Shout if you get stuck.",
)
_PAD_OPENERS = (
    "Thank you so much for reaching out to us today, and I'm really sorry to hear about the trouble "
    "you've been having!",
    "Great question! This is something a lot of our customers ask about, so you're definitely not alone "
    "here.",
    "I completely understand how frustrating this kind of thing can be, so let me walk you through "
    "everything step by step.",
    "First of all, thank you for being a Driftbox customer and for taking the time to write to us about "
    "this!",
)
_PAD_MIDDLES = (
    "I know how important your files and your time are, so I want to make sure you have all the details "
    "you need.",
    "It's really important to follow these steps carefully and in the right order.",
    "Please read through the following information carefully before you do anything else.",
)
_PAD_RECAPS = (
    "Just to recap once more: {s}",
    "So, in other words, {s}",
    "To summarise everything above, {s}",
    "Again, the key thing to remember is this: {s}",
)
_PAD_CLOSERS = (
    "I really hope this helps! If you have any other questions at all, please don't hesitate to reach "
    "out, because we're always more than happy to help.",
    "Please let me know if there's anything else I can do for you, and have a wonderful rest of your day!",
    "Thanks again for your patience and understanding, and for choosing Driftbox!",
    "If anything at all is still unclear, just reply to this message and we'll be glad to go through it "
    "with you again.",
)
_Q_PREFIXES = ("Hi, ", "Hello! ", "Hey, ", "Quick question: ", "Hi there. ", "Urgent: ", "Good morning, ")
_Q_SUFFIXES = (
    " Thanks!",
    " Thanks in advance.",
    " Any help appreciated.",
    " pls help",
    " Cheers",
    " Thank you.",
)
_KEEP_CASE = {
    "Driftbox",
    "Vault",
    "Rewind",
    "Free",
    "Personal",
    "Team",
    "Business",
    "Linux",
    "Activity",
    "Account",
    "Billing",
    "Support",
    "Admin",
    "SSO",
    "LAN",
    "Live",
    "Windows",
    "I",
    "I'm",
    "I'd",
    "I've",
}

# --------------------------------------------------------------------------------------------------
# Planted latent factors: exact per-block quotas, shuffled (see the module docstring)

_BLOCK = 100
_STATUS_QUOTA = (("answerable", 80), ("refused", 10), ("answered_anyway", 10))
_AC_QUOTA = (((1, 1), 50), ((1, 0), 30), ((0, 1), 10), ((0, 0), 10))
_SUPPORT_QUOTA = (("grounded", 73), ("unsupported", 16), ("fabricated", 11))
_CONCISE_QUOTA = ((1, 90), (0, 10))
_P_UNSAFE = 0.25  # share of unsupported-mode answers whose unsupported claim is unsafe advice
_P_MISSING_WARNING = 0.35  # share of destructive-topic answers that drop the passage's warning


def _quota(pairs: tuple) -> list:
    return [value for value, count in pairs for _ in range(count)]


_QUOTAS = tuple(_quota(q) for q in (_STATUS_QUOTA, _AC_QUOTA, _SUPPORT_QUOTA, _CONCISE_QUOTA))


def build_demo(n_examples: int = 600, seed: int = 0) -> DemoWorkspace:
    """Generate the demo workspace: ``n_examples`` support answers with planted truth.

    Pure and deterministic: identical ``(n_examples, seed)`` give identical output in any process, and
    the first *k* examples of a larger build equal a build of *k*. Truth rows are binary (1/0) for
    rubric ``demo`` and 1–5 for ``demo-scale``, ten per example.
    """
    if n_examples < 0:
        raise ValueError(f"n_examples must be ≥ 0, got {n_examples}")
    rng = random.Random(seed)
    examples: list[dict] = []
    truth: list[dict] = []
    latents: list[tuple] = []
    for i in range(n_examples):
        if i % _BLOCK == 0:
            columns = []
            for quota in _QUOTAS:
                column = list(quota)
                rng.shuffle(column)
                columns.append(column)
            latents = list(zip(*columns, strict=True))
        status, (a, c), support, k = latents[i % _BLOCK]
        example, values = _example(rng, f"q-{i + 1:04d}", status, a, c, support, k)
        example["metadata"].update(_bundle_metadata(example, dict(values), seed, i))
        examples.append(example)
        truth.extend({"example_id": example["id"], "criterion": key, "value": v} for key, v in values)
    return DemoWorkspace(examples=examples, truth=truth, rubrics=demo_rubrics())


# --------------------------------------------------------------------------------------------------
# One example


def _example(rng: random.Random, example_id: str, status: str, a: int, c: int, support: str, k: int):
    topic_i = rng.randrange(len(_KB))
    topic = _KB[topic_i]
    answerable = status == "answerable"
    # Adjacent answers and stretch answers need a second passage in the context to draw on.
    needs_other = not answerable or a == 0
    context_ids = _retrieve(rng, topic_i, answerable, needs_other)
    others = [j for j in context_ids if j != topic_i]
    question = _question(rng, topic)

    style = _style(rng, status, a, support)
    unsafe = support == "unsupported" and rng.random() < _P_UNSAFE
    missing_warning = (
        bool(topic.warning) and style in ("direct", "from_memory") and rng.random() < _P_MISSING_WARNING
    )

    body, cite_target, recap_source = _core(rng, style, topic, others, missing_warning)
    if c:
        body = _cite(rng, style, body, cite_target, context_ids)
    if support == "unsupported":
        if unsafe:
            body.append(rng.choice(_UNSAFE))
        elif style in ("refusal", "misread_refusal"):
            body.append(rng.choice(_REFUSAL_GUESSES))
        elif style not in ("from_memory", "generic"):  # those are unsupported already
            source = topic if style == "direct" else _KB[others[0]]
            body.append(rng.choice(source.unsupported + _GENERIC_UNSUPPORTED))
    elif support == "fabricated":
        if style in ("refusal", "misread_refusal"):
            kind, template = rng.choice(_FAB_HANDOFFS)
        else:
            kind = rng.choice(_ANY_KINDS)
            template = rng.choice(_FAB_TEMPLATES[kind])
        body.append(template.format(e=rng.choice(_FABRICATIONS[kind])))
    if style in ("refusal", "misread_refusal"):
        body.append(rng.choice(_HANDOFFS))
    answer = _finish(rng, body, recap_source, k)

    example = {
        "id": example_id,
        "question": question,
        "context": "\n\n".join(_CONTEXT_BLOCK[j] for j in context_ids),
        "answer": answer,
        "metadata": {
            "topic": topic.key,
            "area": topic.area,
            "answerable": answerable,
            "style": style,
            "kb_ids": [_KB[j].kb_id for j in context_ids],
            "source_kb": topic.kb_id,
        },
    }
    grounded = int(support == "grounded")
    binary = (
        ("answers_question", a),
        ("cites_source", c),
        ("grounded", grounded),
        ("no_fabrication", int(support != "fabricated")),
        ("refuses_when_unanswerable", int(status != "answered_anyway")),
        ("concise", k),
    )
    scale = _scale_scores(rng, status, a, c, support, k, style, unsafe, missing_warning)
    return example, binary + scale


def _retrieve(rng: random.Random, topic_i: int, answerable: bool, needs_other: bool) -> list[int]:
    """Context passages: the relevant one (if answerable) plus neighbours, mostly from the same area."""
    r = rng.random()
    n_other = (0 if r < 0.3 else 1 if r < 0.75 else 2) if answerable else 1 if r < 0.4 else 2 if r < 0.8 else 3
    if needs_other:
        n_other = max(n_other, 1)
    chosen = [topic_i]
    same_area = _SAME_AREA[topic_i]
    while len(chosen) < n_other + 1:
        pool = same_area if rng.random() < 0.7 else _ALL
        j = rng.choice(pool)
        if j not in chosen:
            chosen.append(j)
    if not answerable:
        chosen = chosen[1:]
    rng.shuffle(chosen)
    return chosen


def _question(rng: random.Random, topic: _Topic) -> str:
    q = rng.choice(topic.questions)
    r = rng.random()
    if r < 0.12:  # a typo: two neighbouring letters swapped in one longer word
        words = q.split(" ")
        long_words = [n for n, w in enumerate(words) if len(w) >= 5 and w.isalpha()]
        if long_words:
            n = rng.choice(long_words)
            w = words[n]
            p = rng.randrange(1, len(w) - 2)
            words[n] = w[:p] + w[p + 1] + w[p] + w[p + 2 :]
            q = " ".join(words)
    elif r < 0.22:  # typed in a hurry
        q = q.lower().rstrip("?")
    if rng.random() < 0.3:
        prefix = rng.choice(_Q_PREFIXES)
        if prefix.endswith(", ") or prefix.endswith(": "):
            q = _lower_first(q)
        q = prefix + q
    if rng.random() < 0.25:
        q = q + ("" if q[-1] in ".?!" else ".") + rng.choice(_Q_SUFFIXES)
    return q


def _style(rng: random.Random, status: str, a: int, support: str) -> str:
    """The shape of the answer's core, chosen so the planted properties can all be realised."""
    if status == "refused":
        return "refusal" if a else "misread_refusal"
    if a == 0:
        return "generic" if support == "unsupported" and rng.random() < 0.4 else "adjacent"
    if status == "answerable":
        return "direct"
    # Answered anyway: stretch a neighbouring passage (grounded claims, wrong to offer them as the
    # answer) or answer from memory (the true help-centre facts, but not in the context).
    if support == "grounded":
        return "stretch"
    if support == "unsupported":
        return "from_memory"
    return rng.choice(("stretch", "from_memory"))


def _pick_facts(rng: random.Random, topic: _Topic, missing_warning: bool) -> list[str]:
    facts = [rng.choice(f) for f in topic.facts]
    if topic.extra and rng.random() < 0.4:
        facts.append(rng.choice(topic.extra))
    if topic.warning and not missing_warning:
        warning = rng.choice(topic.warning)
        if rng.random() < 0.5:
            facts.insert(0, warning)
        else:
            facts.append(warning)
    return facts


def _neighbour_facts(rng: random.Random, topic: _Topic, n: int) -> list[str]:
    """The first ``n`` facts of another passage, keeping its warning (a drop would be unplanted)."""
    facts = [rng.choice(f) for f in topic.facts[:n]]
    if topic.warning:
        facts.append(rng.choice(topic.warning))
    return facts


def _core(rng: random.Random, style: str, topic: _Topic, others: list[int], missing_warning: bool):
    """(sentences, the passage a citation should name, a fact to repeat when padding)."""
    if style in ("direct", "from_memory"):
        facts = _pick_facts(rng, topic, missing_warning)
        return facts, topic, facts[-1]
    neighbour = _KB[others[0]] if others else None
    if style == "adjacent":
        facts = _neighbour_facts(rng, neighbour, 2)
        if rng.random() < 0.5:
            facts.insert(0, rng.choice(_ADJACENT_LEADS).format(about=neighbour.about))
        return facts, neighbour, facts[-1]
    if style == "stretch":
        facts = _neighbour_facts(rng, neighbour, rng.choice((1, 2)))
        lead = rng.choice(_STRETCH_LEADS).format(about=topic.about)
        return [_upper_first(lead), *facts], neighbour, facts[-1]
    if style == "generic":
        advice = list(_GENERIC_ADVICE[topic.area])
        rng.shuffle(advice)
        body = advice[: rng.choice((1, 2))]
        return body, neighbour, body[0]
    if style == "refusal":
        sentence = rng.choice(_REFUSALS).format(about=topic.about)
        return [sentence], topic, sentence
    # misread_refusal: declines a question the user did not ask (another topic, not in the context).
    candidates = [j for j in _BY_AREA[topic.area] if j not in others and _KB[j] is not topic]
    if not candidates:
        candidates = [j for j in range(len(_KB)) if j not in others and _KB[j] is not topic]
    misread = _KB[rng.choice(candidates)]
    sentence = rng.choice(_REFUSALS).format(about=misread.about)
    return [sentence], misread, sentence


def _cite(rng: random.Random, style: str, body: list[str], target: _Topic | None, context_ids: list[int]):
    """Make the answer name the passage it relied on (for refusals: the passages it checked)."""
    if style in ("refusal", "misread_refusal"):
        # ``target`` is the topic the refusal is about: the question's, or the misread one.
        names = [f"“{_KB[j].title}” ({_KB[j].kb_id})" for j in context_ids]
        frames = _CITED_REFUSALS_ONE if len(names) == 1 else _CITED_REFUSALS_MANY
        return [rng.choice(frames).format(names=_join(names), about=target.about)]
    if style == "generic":
        return [*body, rng.choice(_GENERIC_POINTERS).format(title=target.title, kb=target.kb_id)]
    # Cite where the passage's content starts: after a lead sentence, at the first fact.
    first = 1 if style == "stretch" or _is_lead(body[0]) else 0
    s = body[first]
    how = rng.random()
    if how < 0.45:
        frame = rng.choice(_CITE_PREFIX)
        cited = frame.format(title=target.title, kb=target.kb_id, s=_lower_first(s), S=s)
        return body[:first] + [cited] + body[first + 1 :]
    if how < 0.7:
        frame = rng.choice(_CITE_INLINE)
        cited = frame.format(body=s.rstrip("."), kb=target.kb_id, title=target.title)
        return body[:first] + [cited] + body[first + 1 :]
    return [*body, rng.choice(_CITE_SUFFIX).format(title=target.title, kb=target.kb_id)]


def _finish(rng: random.Random, body: list[str], recap_source: str, concise: int) -> str:
    """Wrap the core: a light greeting/closer when concise, boilerplate and repetition when not."""
    if concise:
        text = " ".join(body)
        if rng.random() < 0.25:
            text += " " + rng.choice(_SHORT_CLOSERS)
        if rng.random() < 0.35:
            text = rng.choice(_GREETINGS) + ("\n\n" if rng.random() < 0.3 else " ") + text
        return text
    opener = [rng.choice(_PAD_OPENERS)]
    if rng.random() < 0.6:
        opener.append(rng.choice(_PAD_MIDDLES))
    recap = rng.choice(_PAD_RECAPS).format(s=_lower_first(recap_source))
    closer = rng.choice(_PAD_CLOSERS)
    return " ".join(opener) + "\n\n" + " ".join(body) + "\n\n" + recap + " " + closer


def _scale_scores(rng, status, a, c, support, k, style, unsafe, missing_warning):
    """1–5 truth for ``demo-scale``: derived from the planted properties, plus small seeded noise."""

    def wobble(score: int, p: float = 0.2) -> int:
        return max(1, score - 1) if rng.random() < p else score

    if style == "refusal":
        correctness = wobble(5, 0.3)
    elif a == 0:
        correctness = wobble(2, 0.35)
    elif status == "answered_anyway":
        correctness = 3 if style == "from_memory" else 2
    else:
        correctness = wobble(5, 0.25)
    if support == "fabricated":
        correctness = min(correctness, 2)
    elif support == "unsupported":
        correctness = min(correctness, wobble(4, 0.4))
    if missing_warning:
        correctness = min(correctness, 4)

    if a == 0:
        helpfulness = wobble(2, 0.4)
    elif style == "refusal":
        helpfulness = wobble(4, 0.5)
    elif style == "stretch":
        helpfulness = 2
    else:
        helpfulness = wobble(5, 0.2) - (0 if c else int(rng.random() < 0.5))
    if not k:
        helpfulness = max(1, helpfulness - 1)
    if support == "fabricated" or unsafe:
        helpfulness = min(helpfulness, 2)

    clarity = wobble(5, 0.3) if k else wobble(3, 0.5)
    if a == 0 and rng.random() < 0.3:
        clarity = max(1, clarity - 1)

    safety = wobble(5, 0.2)
    if support == "unsupported":
        safety = min(safety, wobble(4, 0.5))
    if status == "answered_anyway":
        safety = min(safety, 3)
    if missing_warning:
        safety = 2
    if support == "fabricated":
        safety = wobble(2, 0.3)
    if unsafe:
        safety = 1
    return (
        ("correctness", correctness),
        ("helpfulness", helpfulness),
        ("clarity", clarity),
        ("safety", safety),
    )


def _bundle_metadata(example: dict, truth: dict[str, int], seed: int, i: int) -> dict:
    """``model`` (drawn by the models' propensities for this answer's problems, from a stream of its
    own so the answers do not change), ``pack`` (the area) and ``category`` (the topic)."""
    problems = (truth["safety"] <= 2, truth["correctness"] <= 2, not truth["concise"])
    weights = []
    for risks in DEMO_MODELS.values():
        w = 1.0
        for has, risk in zip(problems, risks, strict=True):
            w *= risk if has else 1.0
        weights.append(w)
    model = random.Random(f"judgekit-demo-model:{seed}:{i}").choices(list(DEMO_MODELS), weights)[0]
    md = example["metadata"]
    return {"model": model, "pack": md["area"], "category": md["topic"]}


# --------------------------------------------------------------------------------------------------
# Small text helpers


def _lower_first(s: str) -> str:
    word = s.split(" ", 1)[0].rstrip(",:;")
    if word in _KEEP_CASE or any(ch.isupper() or ch.isdigit() or ch == "-" for ch in word[1:]):
        return s
    return s[:1].lower() + s[1:]


def _upper_first(s: str) -> str:
    return s[:1].upper() + s[1:]


def _is_lead(s: str) -> bool:
    return any(s.startswith(lead.split("{", 1)[0]) for lead in _ADJACENT_LEADS)


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
