"""The course's toy translation task: dates written by people -> ISO 8601.

    "tuesday, march 5, 2024"  ->  "2024-03-05"
    "05.03.2024"              ->  "2024-03-05"

Source and target differ in length (T_x != T_y), the source comes in several
formats, and the answer is exact, so "exact match" is a clear score. Everything
is generated here from a seed with the standard library's ``datetime``: no
download, the same data on every machine.

Tokens are words, with every digit and every punctuation mark a token of its
own ("march 5, 2024" -> march 5 , 2 0 2 4), so a number never needs a vocabulary
entry of its own: many large language models split numbers into digits the same
way. The ISO target is then one token per character. Vocabularies follow
notebook 01: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, ``<unk>`` 3, then the tokens by
decreasing count, ties in alphabetical order.
"""
import collections
import datetime
import itertools
import random
import re
from dataclasses import dataclass

import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
FIRST_DAY, LAST_DAY = datetime.date(1950, 1, 1), datetime.date(2049, 12, 31)


def _ordinal(n):
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st, 22nd, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# name -> how a person might write the date d (all lower case). Some add the day of the week after
# the date, which makes the source longer without adding anything the ISO form needs.
FORMATS = {
    "d month yyyy": lambda d: f"{d.day} {MONTHS[d.month - 1]} {d.year}",
    "month d, yyyy": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}",
    "dd.mm.yyyy": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
    "mm/dd/yyyy": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
    "the dth of month yyyy": lambda d: f"the {_ordinal(d.day)} of {MONTHS[d.month - 1]} {d.year}",
    "weekday, month d, yyyy": lambda d: f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {d.day}, {d.year}",
    "d mon yyyy, wkd": lambda d: f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}, {WEEKDAYS[d.weekday()][:3]}",
    "month d, yyyy, a weekday": lambda d: f"{MONTHS[d.month - 1]} {d.day}, {d.year}, a {WEEKDAYS[d.weekday()]}",
}


def is_iso_date(text):
    """True for a real calendar day written YYYY-MM-DD, as the task's targets are ("2014-02-30" is not one)."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def format_of(source, target):
    """The name of the format (a key of FORMATS) in which ``source`` writes the date ``target`` (YYYY-MM-DD)."""
    d = datetime.date.fromisoformat(target)
    for name in FORMATS:
        if render(d, name) == source:
            return name
    raise ValueError(f"{source!r} writes {target} in none of the task's formats")


def iso(d):
    """The target: ``YYYY-MM-DD``."""
    return d.isoformat()


def render(d, fmt):
    """Write date ``d`` in format ``fmt`` (a key of FORMATS)."""
    return FORMATS[fmt](d)


@dataclass(frozen=True)
class DateTask:
    """Train / validation / test pairs (source, target) and the two vocabularies.

    The three splits hold different calendar days, so no date of the test set
    was seen in training in any format.
    """
    train: list
    val: list
    test: list
    src_vocab: dict
    tgt_vocab: dict


def make_date_task(n_train=20000, n_val=1000, n_test=2000, seed=0):
    """The date task, deterministic in ``seed``.

    Days between 1950-01-01 and 2049-12-31 are shuffled and dealt out to the test,
    validation and training sets (in that order, so the test set does not depend
    on ``n_train``); each day gets one format drawn at random. In a run capped by
    ``COURSE_MAX_TRAIN_STEPS`` (class grading, the tests' reduced run) the validation
    and test sets hold at most ``training.REDUCED_EVAL`` dates each.
    """
    from .training import eval_cap
    n_val, n_test = eval_cap(n_val), eval_cap(n_test)
    n_days = (LAST_DAY - FIRST_DAY).days + 1
    if min(n_train, n_val, n_test) < 0 or n_train + n_val + n_test > n_days:
        raise ValueError(f"split sizes must be >= 0 and add up to at most {n_days} (one pair per day)")
    rng = random.Random(seed)
    offsets = list(range(n_days))
    rng.shuffle(offsets)
    names = list(FORMATS)

    def pairs(chunk):
        out = []
        for k in chunk:
            d = FIRST_DAY + datetime.timedelta(days=k)
            out.append((render(d, names[rng.randrange(len(names))]), iso(d)))
        return out

    test = pairs(offsets[:n_test])
    val = pairs(offsets[n_test:n_test + n_val])
    train = pairs(offsets[n_test + n_val:n_test + n_val + n_train])
    # the vocabularies hold every token the task can produce, not only those of the training set
    every = [render(datetime.date(2023, m, d), f) for m in range(1, 13) for d in (1, 2, 3, 4, 21, 22, 23, 30)
             if not (m == 2 and d == 30) for f in names] + ["0 1 2 3 4 5 6 7 8 9"]
    src_vocab = build_vocab([s for s, _ in train] + every)
    tgt_vocab = build_vocab([t for _, t in train] + ["0123456789-"])
    return DateTask(train, val, test, src_vocab, tgt_vocab)


# ---------------------------------------------------------------- the long variant (notebook 10)
# Words of the note that follows a date in the long variant: none is a month, a weekday, a digit or a word the
# date formats use ("the", "of", "a"), so the date is the only part of a source that tells the answer.
NOTE_WORDS = ("meeting", "moved", "room", "call", "lunch", "team", "report", "sent", "late", "early", "office",
              "train", "rain", "paid", "bill", "doctor", "visit", "parcel", "arrived", "left", "home", "work",
              "party", "friends", "garden", "book", "read", "walk", "park", "dinner", "cooked", "slept", "well",
              "busy", "quiet", "day", "and", "then", "after", "before")
LONG_LENGTHS = (12, 41)  # the long variant's source lengths in tokens, both ends included


def _check_bare(bare):
    if not 0 <= bare <= 1:
        raise ValueError(f"the share of bare dates must lie between 0 and 1, got {bare}")


def _note(rng, k):
    """``k`` words of ``NOTE_WORDS`` drawn at random."""
    return [NOTE_WORDS[rng.randrange(len(NOTE_WORDS))] for _ in range(k)]


def make_long_date_task(n_train=20000, n_val=1000, n_test=2000, seed=0, lengths=LONG_LENGTHS, bare=0.5):
    """The long variant of the date task (notebook 10): diary lines, each a date and then a note.

        "march 5, 2024 lunch team late paid ... walk"  ->  "2024-03-05"

    Each line's length in tokens is drawn uniformly from ``lengths`` (both ends included) *before* its
    format, and the note (words of ``NOTE_WORDS`` drawn at random) fills what the date leaves, so every
    format comes at every length: the length of a line says nothing about its format, and the longer the
    line, the further its date lies from the end. The validation and test sets hold diary lines only; a share
    ``bare`` of the training pairs keep the bare date of ``make_date_task`` (no note), so that every model
    meets dates on their own as well. The days, splits, formats and targets are those of ``make_date_task``
    (the same days go to the same splits for the same seed); in a run capped by ``COURSE_MAX_TRAIN_STEPS`` the
    validation and test sets hold at most ``training.REDUCED_EVAL`` dates each.
    """
    lo, hi = lengths
    longest = max(len(tokenize(render(datetime.date(2023, 9, 27), f))) for f in FORMATS)  # 11 tokens
    if not longest < lo <= hi:
        raise ValueError(f"source lengths must run from more than {longest} tokens (the longest date, with one "
                         f"word of note at least) up to at least that, got {lo} to {hi}")
    _check_bare(bare)
    base = make_date_task(n_train, n_val, n_test, seed)
    rng = random.Random(f"long {seed}")

    def lengthen(pairs, share):
        out = []
        for source, target in pairs:
            n = rng.randint(lo, hi)  # drawn alone: independent of the format
            if rng.random() < share:
                out.append((source, target))
                continue
            note = _note(rng, n - len(tokenize(source)))
            out.append((" ".join([source, *note]), target))
        return out

    test, val, train = lengthen(base.test, 0), lengthen(base.val, 0), lengthen(base.train, bare)
    every = [" ".join(t for t in base.src_vocab if t not in SPECIALS), " ".join(NOTE_WORDS)]  # every token
    src_vocab = build_vocab([s for s, _ in train] + every)
    return DateTask(train, val, test, src_vocab, base.tgt_vocab)


# ---------------------------------------------------------------- the diary (notebook 10's experiment)
DIARY_FORMATS = ("dd.mm.yyyy", "mm/dd/yyyy")  # 10 tokens each (8 digits, 2 marks): the separator says the order
DIARY_LENGTHS = (10, 44)  # the diary's source lengths in tokens, both ends included


def make_diary_task(n_train=20000, n_val=1000, n_test=2000, seed=0, lengths=DIARY_LENGTHS, bare=0.5):
    """Notebook 10's task: a numeric date somewhere in a diary line of 10 to 44 tokens, to be written in ISO.

        "lunch team 23.10.1962 late paid"  ->  "1962-10-23"
        "07/28/1994 friends slept team"     ->  "1994-07-28"

    Each line's length n is drawn uniformly from ``lengths`` (both ends included) and its format from
    ``DIARY_FORMATS`` (both 10 tokens long), each on its own: a line's length says nothing about its format.
    A note of n - 10 words of ``NOTE_WORDS`` (drawn at random) goes around the date. The date ends the line
    with a chance that falls in a straight line with the length, from 1 for the shortest lines to 0 for the
    longest; otherwise at least one word of the note follows it, and the words before it are drawn uniformly
    from what the note allows. So the longer a line, the more of it a reader goes through after the date: a
    fixed context, the last state of a recurrent encoder, has to carry the date through all of it, and
    attention reads it where it stands.

    The validation and test sets hold lines only; a share ``bare`` of the training pairs keep the bare date (no
    note). The days, splits and targets are those of ``make_date_task`` for the same seed; in a run capped by
    ``COURSE_MAX_TRAIN_STEPS`` the validation and test sets hold at most ``training.REDUCED_EVAL`` dates each.
    """
    lo, hi = lengths
    date_length = 10
    if not date_length <= lo < hi:
        raise ValueError(f"source lengths must run from at least {date_length} tokens (a date alone) to more than "
                         f"that, got {lo} to {hi}")
    _check_bare(bare)
    base = make_date_task(n_train, n_val, n_test, seed)
    rng = random.Random(f"diary {seed}")

    def lines(pairs, share):
        out = []
        for _, target in pairs:
            d = datetime.date.fromisoformat(target)
            n, fmt = rng.randint(lo, hi), DIARY_FORMATS[rng.randrange(len(DIARY_FORMATS))]
            date = render(d, fmt)
            if rng.random() < share:
                out.append((date, target))
                continue
            note = _note(rng, n - date_length)
            last = not note or rng.random() < (hi - n) / (hi - lo)
            before = len(note) if last else rng.randrange(len(note))  # some word after it, when not last
            out.append((" ".join([*note[:before], date, *note[before:]]), target))
        return out

    test, val, train = lines(base.test, 0), lines(base.val, 0), lines(base.train, bare)
    every = ["0 1 2 3 4 5 6 7 8 9 . /", " ".join(NOTE_WORDS)]  # every token a line can hold
    src_vocab = build_vocab([s for s, _ in train] + every)
    return DateTask(train, val, test, src_vocab, base.tgt_vocab)


# ---------------------------------------------------------------- tokens <-> ids
TOKEN = re.compile(r"[a-z]+|[0-9]|[^\sa-z0-9]")


def tokenize(text):
    """Lower-cased words; each digit and each punctuation mark is a token of its own."""
    return TOKEN.findall(text.lower())


def build_vocab(texts):
    """Notebook 01's vocabulary over ``tokenize``: specials 0-3, then by decreasing count, ties A-Z.

    Written with ``collections.Counter``, not as a copy of notebook 01's answer."""
    counts = collections.Counter(itertools.chain.from_iterable(map(tokenize, texts)))
    kept = sorted(counts.keys() - set(SPECIALS), key=lambda t: (-counts[t], t))
    return dict(zip([*SPECIALS, *kept], itertools.count()))


def to_ids(text, vocab, bos=False, eos=False):
    """Text to ids (unknown tokens become <unk>), optionally framed by <bos> / <eos>."""
    ids = [vocab.get(tok, vocab[UNK]) for tok in tokenize(text)]
    return ([vocab[BOS]] if bos else []) + ids + ([vocab[EOS]] if eos else [])


def to_text(ids, vocab, sep=""):
    """Ids back to text: <pad> and <bos> skipped, stop at the first <eos>; tokens joined by ``sep``.

    Written with ``itertools.takewhile``, not as a copy of notebook 01's answer."""
    token_of = dict(zip(vocab.values(), vocab.keys()))
    tokens = (token_of.get(int(i), UNK) for i in (ids.tolist() if torch.is_tensor(ids) else ids))
    return sep.join(t for t in itertools.takewhile(lambda t: t != EOS, tokens) if t not in (PAD, BOS))


def pad_rows(rows, device=None):
    """Lists of ids right-padded with <pad> into (ids (B, T), valid (B, T)), valid True on real tokens."""
    T = max((len(r) for r in rows), default=0)
    ids = torch.full((len(rows), T), PAD_ID, dtype=torch.long)
    for b, r in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r, dtype=torch.long)
    return ids.to(device), (ids != PAD_ID).to(device)


def make_batch(pairs, src_vocab, tgt_vocab, device=None):
    """Tensors for a list of (source, target) pairs, right-padded with <pad> = 0.

    Returns a dict:
        src (B, T_x), src_mask (B, T_x)  the source characters, True on real ones;
        tgt_in (B, T_y)                  <bos> y_1 ... y_{T_y - 1}: what the decoder reads (teacher forcing);
        tgt_out (B, T_y), tgt_mask       y_1 ... y_{T_y - 1} <eos>: what it must predict, True on real ones.
    """
    src, src_mask = pad_rows([to_ids(s, src_vocab) for s, _ in pairs], device)
    tgt_in, _ = pad_rows([to_ids(t, tgt_vocab, bos=True) for _, t in pairs], device)
    tgt_out, tgt_mask = pad_rows([to_ids(t, tgt_vocab, eos=True) for _, t in pairs], device)
    return {"src": src, "src_mask": src_mask, "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_mask": tgt_mask}


def shuffled(pairs, batch_size, seed=0):
    """Endless lists of ``batch_size`` pairs, a new order every epoch, deterministic in ``seed``: every model
    trained with the same seed sees the same pairs in the same order."""
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    while True:
        rng.shuffle(order)
        for k in range(0, len(order) - batch_size + 1, batch_size):
            yield [pairs[i] for i in order[k:k + batch_size]]


def batches(pairs, batch_size, src_vocab, tgt_vocab, seed=0, device=None):
    """Endless shuffled mini-batches (``shuffled``) as tensors (``make_batch``)."""
    for chunk in shuffled(pairs, batch_size, seed):
        yield make_batch(chunk, src_vocab, tgt_vocab, device)


# ------------------------------------------------------------------ one stream of text for a decoder-only model
SEP = "="


def lm_vocab(task):
    """One vocabulary for source and target (a decoder-only model reads both as one text), plus ``=``."""
    vocab = dict(task.src_vocab)
    for tok in list(task.tgt_vocab) + [SEP]:
        vocab.setdefault(tok, len(vocab))
    return vocab


def lm_ids(source, target, vocab):
    """``<bos> source = target <eos>`` as ids; with ``target=None`` the prompt ``<bos> source =``."""
    prompt = to_ids(source, vocab, bos=True) + [vocab[SEP]]
    return prompt if target is None else prompt + to_ids(target, vocab, eos=True)


def lm_batches(pairs, batch_size, vocab, seed=0, device=None):
    """Endless shuffled batches (``shuffled``) of ``<bos> source = target <eos>``: (ids (B, T), valid (B, T))."""
    for chunk in shuffled(pairs, batch_size, seed):
        yield pad_rows([lm_ids(s, t, vocab) for s, t in chunk], device)


# ---------------------------------------------------------------- notebook 06: a word's meaning from its context
SENSES = ("river", "money")  # the two senses of the ambiguous word, sense 0 and sense 1
SENSE_CLUES = (("river", "water", "fish", "boat", "shore", "mud"),        # words that mean sense 0
               ("money", "cash", "loan", "account", "coins", "teller"))  # words that mean sense 1
SENSE_FILLERS = ("the", "a", "we", "saw", "near", "old", "big", "walked", "to", "by", "was", "that", "today", "then",
                 "there", "it", "very", "quiet", "again", "later")


@dataclass(frozen=True)
class SenseTask:
    """Sentences of one length holding the word ``bank`` once and one clue to its sense, before it or after it.

    ``train`` and ``probe`` hold (tokens, position of the word, sense, side) with sense 0 (river) or 1 (money) and
    side "before" or "after" (where the clue stands); every other token is a filler that says nothing of the sense.
    """
    train: list
    probe: list
    vocab: dict
    word: str


def make_sense_task(n_train=4000, n_probe=4000, T=8, word="bank", seed=0):
    """The word-sense corpus of notebook 06, deterministic in ``seed``: ``n_train`` sentences to train a model on,
    ``n_probe`` others (half with the clue before the word, half after it) to probe it with. The word sits at a
    position drawn from 1 .. T-2, so that both sides have room; the clue at a position drawn on its side."""
    if T < 3:
        raise ValueError(f"a sentence needs T >= 3 tokens (a clue, the word and room on both sides), got T={T}")
    rng = random.Random(seed)

    def sentence(side):
        p = rng.randrange(1, T - 1)
        sense = rng.randrange(2)
        tokens = [rng.choice(SENSE_FILLERS) for _ in range(T)]
        tokens[p] = word
        tokens[rng.randrange(0, p) if side == "before" else rng.randrange(p + 1, T)] = rng.choice(SENSE_CLUES[sense])
        return tokens, p, sense, side

    train = [sentence(rng.choice(("before", "after"))) for _ in range(n_train)]
    probe = [sentence(side) for side in ("before", "after") for _ in range(n_probe // 2)]
    tags = tuple(f"{word}:{sense}" for sense in SENSES)  # the word with its sense spelled out: what the models learn
    vocab = {t: i for i, t in enumerate(SPECIALS + (word,) + SENSE_CLUES[0] + SENSE_CLUES[1] + SENSE_FILLERS + tags)}
    return SenseTask(train, probe, vocab, word)


def sense_batch(sentences, vocab):
    """(ids (B, T), positions (B,), senses (B,)) of sentences of one length, as ``make_sense_task`` makes them."""
    ids = torch.tensor([[vocab[t] for t in tokens] for tokens, _, _, _ in sentences], dtype=torch.long)
    positions = torch.tensor([p for _, p, _, _ in sentences], dtype=torch.long)
    senses = torch.tensor([s for _, _, s, _ in sentences], dtype=torch.long)
    return ids, positions, senses


def sense_game_batches(task, batch_size, seed=0):
    """Endless seeded batches of notebook 06's game: (ids (B, T), targets (B, T), at_word (B,T)). ``targets`` is the
    sentence with the word's sense spelled out (``bank`` becomes ``bank:river`` or ``bank:money``); ``at_word`` is
    True at the word's position only, the one place the game scores."""
    tags = torch.tensor([task.vocab[f"{task.word}:{sense}"] for sense in SENSES])
    for chunk in shuffled(task.train, batch_size, seed):
        ids, positions, senses = sense_batch(chunk, task.vocab)
        rows = torch.arange(len(chunk))
        targets = ids.clone()
        targets[rows, positions] = tags[senses]
        at_word = torch.zeros_like(ids, dtype=torch.bool)
        at_word[rows, positions] = True
        yield ids, targets, at_word


def mask_tokens(ids, valid, mask_id, p=0.15, generator=None):
    """BERT-style corruption: hide a share ``p`` of the real tokens behind ``mask_id``.

    Returns (inputs, is_masked); every sequence with a real token gets at least one mask.
    """
    r = torch.rand(ids.shape, generator=generator)
    is_masked = (r < p) & valid
    first = torch.where(valid, r, torch.full_like(r, 2.0)).argmin(dim=1)  # one real position per row
    force = torch.zeros_like(is_masked)
    force[torch.arange(ids.shape[0]), first] = True
    is_masked |= force & valid & ~is_masked.any(dim=1, keepdim=True)
    return ids.masked_fill(is_masked, mask_id), is_masked
