"""Word spaces RapidOCR's recogniser drops ("SANYUSTATIONERYSHOP"), put back from Tesseract's reading of the same
text lines.

RapidOCR reads more of a phone-quality scan's letters right than Tesseract (docs/eval/ocr-settings.md), but its
CTC recogniser leaves out some spaces between words, and its own output cannot tell where: the column gaps inside
a glued name are those between its letters. Tesseract finds words from the gaps in the image, though it misreads
more letters ("SANYO STATIONERY SHOP"). So where a letterhead line (the page's topmost boxes, where a glued shop name
costs the issuer) reads as words run together, Tesseract reads the same crop, the two readings are aligned
character by character, and a space goes between two of RapidOCR's letters where Tesseract has one between the
letters aligned to them. Only spaces are added, only between runs of two letters or more: every character of the
text is still RapidOCR's, and digits, codes and punctuation are never split. Pages without such a line never start
Tesseract, so the OCR time of most pages is unchanged.

A page's lines are read in one Tesseract call (the crops stacked into one image, each word assigned back to its
crop by where it lies), since starting Tesseract costs more than reading a line.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any

from pipeline.ingest.ocr_layout import TextBox
from pipeline.ingest.ocr_tesseract import tesseract_words

# A line of fifteen letters or more without one space: two words or more run together (few single words are that
# long). A line that has spaces is left as read: there the recogniser did find the gaps, and Tesseract, which may
# split a word at a wide letter gap ("ENTERP RISE"), would add more harm than help.
GLUED_LETTERS = 15
MIN_AGREEMENT = 0.8  # the two readings' similarity (difflib ratio, spaces aside) below which Tesseract's is ignored
GAP_PX = 24  # white rows between stacked crops
PAD = 0.15  # of a line's height, around its crop
HEAD_BOXES = 8  # the page's topmost text boxes: the letterhead, where a glued name costs the issuer
# Tesseract's English model only: the spaces are what is read here, and the five language packs of the Tesseract
# engine made each call slower (docs/eval/ocr-settings.md)
LANGUAGE = "eng"


def glued(line: str) -> bool:
    """Whether a line reads as words run together: no space in it, and GLUED_LETTERS letters or more."""
    line = line.strip()
    return not any(ch.isspace() for ch in line) and sum(ch.isalpha() for ch in line) >= GLUED_LETTERS


def spaced(rapid: str, other: str) -> str:
    """`rapid` with a space between two of its letters wherever `other`, another reading of the same line, has a
    space between the characters aligned to them. Unchanged where the readings agree less than MIN_AGREEMENT."""
    a_pos = [i for i, ch in enumerate(rapid) if not ch.isspace()]
    a = "".join(rapid[i] for i in a_pos)
    b_chars: list[str] = []
    space_before: set[int] = set()  # indices into b (spaces removed) that follow a space in `other`
    for ch in other:
        if ch.isspace():
            if b_chars:
                space_before.add(len(b_chars))
        else:
            b_chars.append(ch)
    b = "".join(b_chars)
    if not a or not b:
        return rapid
    matcher = SequenceMatcher(None, _fold(a), _fold(b), autojunk=False)
    if matcher.ratio() < MIN_AGREEMENT:
        return rapid
    to_a: dict[int, int] = {}  # b index -> a index, where the two align one to one (equal or same-length replace)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
            to_a.update({j1 + k: i1 + k for k in range(j2 - j1)})
    insert_before: set[int] = set()  # positions in `rapid`
    for j in space_before:
        left_j = j - 1
        while left_j >= 0 and left_j not in to_a and not b[left_j].isalnum():  # "CHERAS, SELANGOR": past the comma
            left_j -= 1
        i = to_a.get(j)
        if i is None or to_a.get(left_j) != i - 1:
            continue
        left, right = a_pos[i - 1], a_pos[i]
        if right == left + 1 and _letters_either_side(rapid, right):
            insert_before.add(right)
    return "".join(f" {ch}" if k in insert_before else ch for k, ch in enumerate(rapid))


def _fold(text: str) -> str:
    """Lower case, one character for one ("ß" and "İ" kept as they are), so indices into the text still hold."""
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _letters_either_side(text: str, at: int) -> bool:
    """Two letters right before `at` and two right after: a split never leaves a letter alone ("GEMBILAN G") and
    never touches a figure or a code."""
    return bool(re.search(r"[^\W\d_]{2}$", text[:at]) and re.match(r"[^\W\d_]{2}", text[at:]))


def _stacked_words(image: Any, crops: list[tuple[float, float, float, float]]) -> list[list[str]]:
    """Tesseract's words of each crop of `image`, read in one call with the crops stacked one under another."""
    # lazy: only OCR'd pages need it
    from PIL import Image

    parts = [image.crop(tuple(int(round(v)) for v in box)) for box in crops]
    sheet = Image.new("L", (max(p.width for p in parts) + 2 * GAP_PX,
                            sum(p.height for p in parts) + GAP_PX * (len(parts) + 1)), 255)
    bands, y = [], GAP_PX
    for part in parts:
        sheet.paste(part.convert("L"), (GAP_PX, y))
        bands.append((y, y + part.height))
        y += part.height + GAP_PX
    words: list[list[tuple[int, str]]] = [[] for _ in parts]
    for word in tesseract_words(sheet, LANGUAGE, "--psm 6"):
        middle = word.top + word.height / 2
        band = next((k for k, (y0, y1) in enumerate(bands) if y0 <= middle < y1), None)
        if band is not None:
            words[band].append((word.left, word.text))
    return [[w for _, w in sorted(ws)] for ws in words]


def restore_spaces(image: Any, boxes: list[TextBox]) -> tuple[list[TextBox], int]:
    """The boxes with the spaces Tesseract finds put back into lines holding a long run of letters, and how many
    lines changed."""
    top = sorted(range(len(boxes)), key=lambda k: boxes[k].y0)[:HEAD_BOXES]
    todo = sorted(k for k in top if glued(boxes[k].text) and boxes[k].x1 - boxes[k].x0 > boxes[k].y1 - boxes[k].y0)
    if not todo:
        return boxes, 0
    crops = []
    for k in todo:
        b = boxes[k]
        pad = PAD * (b.y1 - b.y0)
        crops.append((max(0.0, b.x0 - pad), max(0.0, b.y0 - pad), min(image.width, b.x1 + pad),
                      min(image.height, b.y1 + pad)))
    out, changed = list(boxes), 0
    for k, words in zip(todo, _stacked_words(image, crops)):
        b = boxes[k]
        text = spaced(b.text, " ".join(words))
        if text != b.text:
            out[k] = TextBox(b.x0, b.y0, b.x1, b.y1, text)
            changed += 1
    return out, changed
