"""Make a deterministic, realistic forum-posts dataset for a post-classification job.

``python sample_data/make_posts.py --out sample_data/posts.jsonl`` writes the committed sample:
2,400 posts about a fictional app ("Tasklane"), spread unevenly over 2025-12 .. 2026-11, one
JSON object per line (UTF-8) with id, month, created_at, author, forum, title and body.
Bodies are mostly 80-900 characters, ~5% are 3,000-6,000 (pasted logs, long stories), ~1% are
under 20; ~8% have non-ASCII text (Chinese, Russian, accented Latin, emoji); some have quotes,
backslashes and newlines. For benchmarks, ``--count N --out PATH --seed S``; without ``--out``
(or with ``--out -``) the posts go to standard output, so the committed sample is never
overwritten unasked. Output is streamed line by line, and the same arguments always give
byte-identical output.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from random import Random
from typing import TextIO

DEFAULT_SEED = 20261130
DEFAULT_COUNT = 2400
MONTHS = ["2025-12"] + [f"2026-{m:02d}" for m in range(1, 12)]
MONTH_WEIGHTS = [150, 170, 120, 200, 230, 280, 260, 190, 210, 240, 180, 170]  # sums to 2400

POOLS: dict[str, list[str]] = {k: v.split("|") for k, v in {
    "feature": "CSV export|calendar view|dark mode|offline mode|the REST API|webhooks|search|"
    "recurring tasks|notifications|two-factor login|the Kanban board|time tracking|tags|sync",
    "platform": "Windows 11|macOS 14|Ubuntu 24.04|Android 14|iOS 18|Firefox 131|Chrome 130",
    "version": "3.1.4|3.2.0|3.2.1|3.3.0-beta.2|3.3.0|3.3.1|4.0.0-rc.1",
    "action": "open a project|drag a task to another column|import a CSV file|log in with SSO|"
    "attach a PDF|switch workspaces|sync after being offline|rename a tag|share a board",
    "symptom": "the app freezes|nothing happens|the task disappears|I get a blank screen|"
    "the sync spinner never stops|it crashes|the dates shift by one day|duplicates appear",
    "error": 'Error: "failed to parse config"|TypeError: cannot read property "id" of undefined|'
    'sqlite3.OperationalError: database is locked|HTTP 502 "Bad Gateway"|E_SYNC_CONFLICT (409)',
    "path": r"C:\Users\anna\AppData\Local\Tasklane\config.json|C:\Program Files\Tasklane\app.log|"
    r"~/.config/tasklane/settings.json|D:\backup\tasklane\export.csv",
    "n": "2|3|5|10|20|50|200|1500",
    "level": "DEBUG|INFO|INFO|INFO|WARN|ERROR",
    "module": "sync.worker|db.pool|http.client|ui.board|auth.sso|import.csv",
}.items()}
# Per kind of post: (forum it usually lands in, weight, title templates, sentence templates).
KINDS: dict[str, tuple[str, int, str, str]] = {
    "question": ("help", 30, "How do I use {feature}?|Does {feature} work on {platform}?|"
                 "Question about {feature}|Can I {action} from the mobile app?",
                 "I am trying to figure out how {feature} works.|Is there a way to {action} "
                 "without losing data?|I looked in the docs but found nothing about {feature}.|"
                 "We are {n} people and share one workspace.|Does this work on {platform} too?|"
                 "Any pointers would be appreciated."),
    "bug": ("bugs", 25, "{symptom} when I {action}|[{version}] {error}|"
            "Crash on {platform} after update to {version}|Bug: {feature} broken since {version}",
            "Since {version}, {symptom} when I {action}.|I am on {platform}.|The log says: {error}|"
            "Steps to reproduce:\n1. Open Tasklane {version}\n2. {action}\n3. Wait a few seconds.|"
            "Config file is at {path}|It happens about {n} times a day.|Reinstalling didn't help."),
    "feature": ("feature-requests", 18, "Feature request: improve {feature}|Please add {feature} "
                "to the mobile app|Idea: let us {action} in bulk|Any plans for {feature}?",
                "It would be great if we could {action} faster.|Right now {feature} feels "
                "incomplete.|Competitors already have {feature}.|Our {n} users would pay for this.|"
                'Maybe a setting like "always use {feature}" would do.'),
    "praise": ("showcase", 10, "{feature} is fantastic|Thank you for {version}!|"
               "Showcase: how our team of {n} uses {feature}",
               "{feature} saves me hours every week.|Great job on {version}, it feels faster.|"
               "We moved {n} projects over and everything just works.|Thanks for listening!"),
    "complaint": ("general", 10, "{feature} got worse in {version}|Why is {feature} so slow?|"
                  "Very disappointed with {version}",
                  "Honestly, {feature} is unusable on {platform}.|Every update breaks something.|"
                  "I reported this {n} weeks ago and nothing happened.|"
                  'Support said "we are looking into it".'),
    "offtopic": ("general", 7, "What music do you listen to while working?|Introduce yourself!|"
                 "Favourite keyboard?", "Not about the app, but I am curious.|I listen to lo-fi "
                 "most of the day.|Just switched to a split keyboard.|Hello, new member here."),
}
GENERIC = ("We use Tasklane at work for {n} projects.|I have used it since {version}.|"
           "My colleague sees the same on {platform}.|Not sure this is the right forum.|"
           "I can share screenshots if needed.|Edit: fixed a typo.").split("|")
FORUMS = ["general", "help", "feature-requests", "bugs", "showcase"]
LANGS = {"en": 920, "zh": 25, "ru": 25, "accented": 20, "emoji": 10}  # per mille
ZH = ("同步功能在更新后无法使用。|请问如何导出所有任务？|我在{platform}上遇到了崩溃。|希望能增加深色模式。|"
      "日历视图非常好用，谢谢！|版本{version}以后速度变慢了。|有没有人遇到同样的问题？").split("|")
RU = ("Синхронизация не работает после обновления.|Подскажите, как экспортировать задачи в CSV?|"
      "На {platform} приложение зависает.|Очень нравится новая версия {version}, спасибо!|"
      "Было бы здорово добавить тёмную тему.|У кого-нибудь есть такая же проблема?").split("|")
ACCENTED = ("Greetings from the café where Jürgen Müller and I plan sprints.|Maybe a naïve "
            "question, sorry.|Le mode hors ligne ne fonctionne plus après la mise à jour.|"
            "Die Synchronisierung schlägt fehl, schöne Grüße.|¿Alguien sabe cómo exportar "
            "las tareas?|Our résumé tracker (Zoë's idea) lives here.").split("|")
OPENERS = ["Hi all,", "Hello!", "Hey team,", "Hi,", "Quick one:", "Long-time user here."]
CLOSERS = ["Thanks in advance.", "Cheers", "Thanks!", "Any help is welcome.", "Regards, Tom"]
EMOJI = ["🎉", "👍", "🚀", "😅", "🙏", "🔥", "🐛", "❤️"]
SHORT = ["+1", "same here", "bump", "thanks!", "any update?", "fixed?", "me too", "👍", "同样的问题",
         "спасибо!"]
SLOT = re.compile(r"\{(\w+)\}")


def fill(rng: Random, template: str) -> str:
    """Replace each {slot} with a random word from its pool."""
    return SLOT.sub(lambda m: rng.choice(POOLS[m.group(1)]), template)


def grow(rng: Random, pool: list[str], target: int, sep: str = " ") -> str:
    """Join filled sentences from pool until the text reaches target characters."""
    order: list[str] = []
    parts: list[str] = []
    size = 0
    while size < target:
        if not order:  # shuffled passes over the pool: repeats only once it runs dry
            order = rng.sample(pool, len(pool))
        text = fill(rng, order.pop())
        parts.append(text[:1].upper() + text[1:])
        size += len(parts[-1]) + len(sep)
    return sep.join(parts)


def log_paste(rng: Random, when: datetime, target: int) -> str:
    """A pasted application log of about target characters."""
    lines = ["Here is the full log from the last crash:", ""]
    size = 0
    while size < target:
        when += timedelta(milliseconds=rng.randint(1, 4000))
        line = (f"{when:%Y-%m-%d %H:%M:%S}.{when.microsecond // 1000:03d} "
                + fill(rng, "{level} [{module}] ")
                + f"request_id={rng.getrandbits(32):08x} latency_ms={rng.randint(3, 9000)}")
        if rng.random() < 0.2:
            line += " " + fill(rng, "{error}")
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines + ["", "Any idea what is going on?"])


def story(rng: Random, sentences: list[str], target: int) -> str:
    """A long rambling story in paragraphs, cut at the first sentence end after target."""
    paras: list[str] = []
    while sum(len(p) + 2 for p in paras) < target:
        paras.append(grow(rng, sentences, rng.randint(300, 700)))
    text = "\n\n".join(paras)
    cut = text.find(". ", target)
    return text if cut < 0 else text[: cut + 1]


def make_body(rng: Random, kind: str, lang: str, when: datetime) -> str:
    """The post body: very short, long (log or story) or normal, in the given language."""
    sentences = KINDS[kind][3].split("|") + rng.sample(GENERIC, 2)
    roll = rng.random()
    if roll < 0.012:
        return rng.choice(SHORT)
    if roll < 0.07 and lang == "en":
        target = rng.randint(3000, 5600)
        if kind in ("bug", "question", "complaint") and rng.random() < 0.7:
            return log_paste(rng, when, target)
        return story(rng, sentences + KINDS["offtopic"][3].split("|"), target)
    target = 80 + int(700 * rng.random() ** 1.5)
    if lang in ("zh", "ru"):
        return grow(rng, ZH, target // 2 + 40, "") if lang == "zh" else grow(rng, RU, target)
    sep = "\n" if rng.random() < 0.2 else " "
    body = grow(rng, sentences, target, sep)
    if rng.random() < 0.4:
        body = f"{rng.choice(OPENERS)}{sep}{body}{sep}{rng.choice(CLOSERS)}"
    if lang == "accented":
        body = fill(rng, rng.choice(ACCENTED)) + " " + body
    return body + " " + rng.choice(EMOJI) if lang == "emoji" else body


def make_title(rng: Random, kind: str, lang: str) -> str:
    """A title from the kind's templates, or a native sentence for Chinese and Russian posts."""
    if lang in ("zh", "ru"):
        return fill(rng, rng.choice(ZH if lang == "zh" else RU)).rstrip("。.!?？")
    title = fill(rng, rng.choice(KINDS[kind][2].split("|")))
    title = title[:1].upper() + title[1:]
    return title + " " + rng.choice(EMOJI) if lang == "emoji" else title


def month_counts(count: int) -> list[int]:
    """Split count over the months in proportion to MONTH_WEIGHTS (largest remainder)."""
    exact = [count * w / sum(MONTH_WEIGHTS) for w in MONTH_WEIGHTS]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(MONTHS)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[: count - sum(counts)]:
        counts[i] += 1
    return counts


def authors(rng: Random, count: int) -> list[str]:
    """A fixed population of handles (picked with a skew: a few people post a lot)."""
    firsts = "anna ben chen dmitri elena felix grace hiro ivan jules kai lena marco nina".split()
    seconds = "dev ops codes writes pm qa ninja builder 42 99 2k tasks plans hacks".split()
    size = max(50, min(20000, count // 6))
    return [f"{rng.choice(firsts)}_{rng.choice(seconds)}{rng.randint(1, 999)}" for _ in range(size)]


def posts(count: int, seed: int) -> Iterator[dict[str, str]]:
    """Yield count posts in time order: post-00001, ... (ids widen past 99,999 posts)."""
    rng = Random(seed)
    people = authors(rng, count)
    width = max(5, len(str(count)))
    number = 0
    for month, n in zip(MONTHS, month_counts(count)):
        start = datetime.strptime(month, "%Y-%m").replace(tzinfo=timezone.utc)
        seconds = int(((start + timedelta(days=32)).replace(day=1) - start).total_seconds())
        for offset in sorted(rng.randrange(seconds) for _ in range(n)):
            number += 1
            when = start + timedelta(seconds=offset)
            kind = rng.choices(list(KINDS), [k[1] for k in KINDS.values()])[0]
            lang = rng.choices(list(LANGS), list(LANGS.values()))[0]
            forum = KINDS[kind][0] if rng.random() < 0.85 else rng.choice(FORUMS)
            yield {"id": f"post-{number:0{width}d}", "month": month,
                   "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "author": people[int(len(people) * rng.random() ** 2)], "forum": forum,
                   "title": make_title(rng, kind, lang), "body": make_body(rng, kind, lang, when)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Write a deterministic forum-posts dataset as JSONL (one post a line), to --out or stdout.",
        epilog="The committed sample: --out sample_data/posts.jsonl (2,400 posts, the default seed).",
    )
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help=f"number of posts (default {DEFAULT_COUNT})")
    parser.add_argument("--out", default="-", help="the file to write; - or none: standard output")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"the seed (default {DEFAULT_SEED})")
    args = parser.parse_args()
    if args.count < 0:
        parser.error("--count must be >= 0")
    if args.out == "-":
        sys.stdout.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
        write(sys.stdout, args.count, args.seed)
        return
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        write(f, args.count, args.seed)


def write(out: TextIO, count: int, seed: int) -> None:
    for post in posts(count, seed):
        out.write(json.dumps(post, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
