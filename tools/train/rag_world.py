"""The world the QA model is trained and evaluated in: short passages about studies of the topics of
examples/make_corpus.py (lighthouses, glaciers, ...), each naming one researcher, one place, one
year and one measured quantity, and questions whose answer is copied from exactly one passage.

Entities are split into disjoint train and test pools (researchers' first and last names, places,
years and quantities), so a model that scores on the test split must read the answer from the
context: it cannot have memorised it.

Standard library only; everything is a pure function of the seed.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from make_corpus import TOPICS  # noqa: E402  (the sample corpus's topics and nouns)

# Per topic: (statement, question, unit). {n} is the quantity, {place} the passage's place.
FACTS = {
    "lighthouses": [
        ("Its light could be seen {n} nautical miles out to sea.",
         "How far out to sea could the light at {place} be seen?", "nautical miles"),
        ("The keepers climbed {n} steps each evening.",
         "How many steps did the keepers at {place} climb each evening?", "steps"),
    ],
    "sourdough": [
        ("The dough was kept at {n} percent hydration.",
         "At what hydration was the dough at {place} kept?", "percent"),
        ("The bakery sold {n} loaves on market days.",
         "How many loaves did the bakery at {place} sell on market days?", "loaves"),
    ],
    "glaciers": [
        ("The terminus retreated {n} metres in one summer.",
         "How far did the terminus at {place} retreat in one summer?", "metres"),
        ("Meltwater discharge peaked at {n} cubic metres per second.",
         "What was the peak meltwater discharge at {place}?", "cubic metres per second"),
    ],
    "beekeeping": [
        ("The apiary produced {n} kilograms of honey that year.",
         "How much honey did the apiary at {place} produce?", "kilograms"),
        ("The keeper tended {n} hives through the winter.",
         "How many hives were tended at {place} through the winter?", "hives"),
    ],
    "orbital mechanics": [
        ("The transfer burn needed {n} metres per second of delta-v.",
         "How much delta-v did the transfer burn planned at {place} need?", "metres per second"),
        ("One orbit took {n} minutes at that altitude.",
         "How long did one orbit take in the work at {place}?", "minutes"),
    ],
    "violin making": [
        ("The workshop finished {n} instruments a year.",
         "How many instruments did the workshop at {place} finish a year?", "instruments"),
        ("The varnish needed {n} coats to cure.",
         "How many coats of varnish were needed at {place}?", "coats"),
    ],
    "tidal energy": [
        ("The array delivered {n} megawatts at peak flow.",
         "How much power did the array at {place} deliver at peak flow?", "megawatts"),
        ("Currents in the channel reached {n} knots at spring tide.",
         "How fast were the currents at {place} at spring tide?", "knots"),
    ],
    "mushroom foraging": [
        ("The group recorded {n} species in one autumn morning.",
         "How many species did the group at {place} record in one morning?", "species"),
        ("Chanterelles appeared {n} days after heavy rain.",
         "How many days after rain did chanterelles appear at {place}?", "days"),
    ],
    "railway signalling": [
        ("The signal box controlled {n} sets of points.",
         "How many sets of points did the signal box at {place} control?", "sets of points"),
        ("The line carried {n} trains a day.",
         "How many trains a day did the line at {place} carry?", "trains"),
    ],
    "coral reefs": [
        ("The survey counted {n} fish species on one transect.",
         "How many fish species did the survey at {place} count?", "fish species"),
        ("The reef covered {n} hectares.",
         "How large was the reef at {place}?", "hectares"),
    ],
    "compilers": [
        ("The optimiser ran {n} passes over the code.",
         "How many passes did the optimiser at {place} run?", "passes"),
        ("Inlining cut call overhead by {n} percent.",
         "By how much did inlining cut call overhead at {place}?", "percent"),
    ],
    "medieval castles": [
        ("The curtain wall stood {n} metres high.",
         "How high was the curtain wall at {place}?", "metres"),
        ("The siege lasted {n} weeks.",
         "How long did the siege at {place} last?", "weeks"),
    ],
}
assert set(FACTS) == set(TOPICS)

# No passage starts with a name: a passage is tokenized on its own, and a name's first token differs
# with and without the space before it; mid-sentence, the name has the same tokens as in the answer.
OPENERS = [
    "In {year}, {person} began a study of the {noun} at {place}.",
    "A study by {person} of the {noun} of {place} began in {year}.",
    "The {noun} at {place} was studied by {person} from {year}.",
    "Records from {place} show that {person} examined the {noun} in {year}.",
]
FILLERS = [  # no year, no quantity: a passage has exactly one of each
    "{last} noted that the {noun} depended on the {noun2}.",
    "At {place}, the {noun} was inspected alongside the {noun2}.",
    "Careful work on the {noun} meant the {noun2} rarely failed.",
    "Visitors to {place} often ask about the {noun2}.",
    "{last} argued that the {noun2} mattered more than the {noun}.",
    "Changes to the {noun2} were made slowly, one season at a time.",
]
# Question forms: (kind, template). Keys in braces are copied verbatim from the gold passage.
QUESTIONS = [
    ("who", "Who studied the {noun} at {place}?"),
    ("who", "Which researcher examined the {noun} at {place}?"),
    ("when", "In which year did {person} begin work on the {noun} at {place}?"),
    ("when", "When did {person} start studying the {noun} of {place}?"),
    ("where", "Where did {person} study the {noun}?"),
    ("where", "At which place did {person} examine the {noun}?"),
    ("how_many", None),  # the topic fact's own question
]
# More wordings of the same questions for training (`make_data.py --question-forms varied`): other
# verbs, word orders, imperatives, the fact before the question word, possessives, wordings that do
# not copy the passage's verbs. The base forms are among them.
VARIED_QUESTIONS = QUESTIONS[:-1] + [
    ("who", "Who was it that worked on the {noun} at {place}?"),
    ("who", "Name the person who looked into the {noun} at {place}."),
    ("who", "At {place}, who researched the {noun}?"),
    ("who", "The {noun} at {place} was studied by whom?"),
    ("who", "Whose work at {place} concerned the {noun}?"),
    ("who", "Tell me who investigated the {noun} at {place}."),
    ("who", "Who did the research on the {noun} of {place}?"),
    ("who", "Which scientist took up the {noun} at {place}?"),
    ("who", "who looked at the {noun} at {place}"),
    ("when", "What year did {person} take up the {noun} at {place}?"),
    ("when", "{person} began on the {noun} at {place} in what year?"),
    ("when", "In what year did the work of {person} on the {noun} at {place} start?"),
    ("when", "When was the {noun} at {place} first studied by {person}?"),
    ("when", "Give the year {person} started on the {noun} at {place}."),
    ("when", "At {place}, when did {person} begin with the {noun}?"),
    ("when", "what year did {person} start on the {noun} of {place}"),
    ("where", "Where was the {noun} that {person} studied?"),
    ("where", "In which place did {person} work on the {noun}?"),
    ("where", "{person} examined the {noun} where?"),
    ("where", "Which site did {person} choose for studying the {noun}?"),
    ("where", "Name the place where {person} looked at the {noun}."),
    ("where", "Where did the research of {person} on the {noun} take place?"),
    ("where", "where did {person} work on the {noun}"),
    ("how_many", None),
]
# Quotation questions (`make_data.py --quote-fraction`): the answer is the whole gold passage, word
# for word, as RAG answers that cite their source are; the passage is the one about the noun at the
# place (the same keys as "who").
QUOTE_QUESTIONS = [
    ("quote", "Quote the passage about the {noun} at {place}."),
    ("quote", "What do the records say about the {noun} at {place}? Quote them."),
    ("quote", "Give the exact text on the {noun} at {place}."),
    ("quote", "Cite what the context says about the {noun} at {place}."),
]
# Held-out wordings, never generated for training: the robustness check (tools/train/reword_eval.py
# rewrites the evaluation questions with them; same fact, same gold passage).
REWORDED_QUESTIONS = [
    ("who", "Who carried out the study of the {noun} in {place}?"),
    ("who", "Which person was behind the research into the {noun} at {place}?"),
    ("who", "Can you tell me who analysed the {noun} at {place}?"),
    ("who", "The study of the {noun} at {place}: who did it?"),
    ("when", "In what year did {person} first turn to the {noun} at {place}?"),
    ("when", "When did the research of {person} into the {noun} at {place} begin?"),
    ("when", "Which year marks the start of the work {person} did on the {noun} at {place}?"),
    ("where", "Where was {person} based while studying the {noun}?"),
    ("where", "Which location did {person} study the {noun} in?"),
    ("where", "Where did {person} carry out research into the {noun}?"),
]

_ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "r", "s", "sh",
           "st", "t", "th", "v", "w", "z", "tr", "kl", "sk"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ei", "ou", "ia", "y"]
_CODAS = ["", "", "n", "r", "l", "s", "th", "m", "nd", "rt", "x", "k"]
_PLACE_SUFFIX = ["holm", "wick", " Bay", "mere", "ford", " Point", "by", "ton", " Ridge", "dale", " Sound",
                 "haven", " Fen", "moor", "gate", " Cove"]


def _word(rng, syllables):
    w = ""
    for _ in range(syllables):
        w += rng.choice(_ONSETS) + rng.choice(_VOWELS)
    w += rng.choice(_CODAS)
    return w[0].upper() + w[1:]


def _unique(rng, make, count):
    out, seen = [], set()
    while len(out) < count:
        w = make(rng)
        if w not in seen and 3 <= len(w) <= 12:
            seen.add(w)
            out.append(w)
    return out


class Pools:
    """Disjoint train/test entity pools. Deterministic for a seed.

    With fresh_train, training names and places are not drawn from the fixed training pools but made
    up anew for each draw (same syllable distribution, never a word of the test pools): a model then
    cannot learn the training entities themselves and has to copy, which is what the test split
    asks of it. Test draws (and hence the evaluation set) are the same either way."""

    def __init__(self, seed=1234, fresh_train=False):
        rng = random.Random(seed)
        firsts = _unique(rng, lambda r: _word(r, r.choice([1, 2])), 900)
        lasts = _unique(rng, lambda r: _word(r, r.choice([2, 2, 3])), 900)
        places = _unique(rng, lambda r: _word(r, r.choice([1, 2])) + r.choice(_PLACE_SUFFIX), 1700)
        lasts = [w for w in lasts if w not in set(firsts)]
        self.first = {"train": firsts[:720], "test": firsts[720:]}
        self.last = {"train": lasts[:700], "test": lasts[700:]}
        self.place = {"train": places[:1200], "test": places[1200:]}
        # Years and quantities: a pseudo-random ~12% subset is held out (no digit pattern to learn).
        self.year = {s: [y for y in range(1700, 2030) if (_held_out(y) == (s == "test"))] for s in ("train", "test")}
        self.n = {s: [n for n in range(2, 1000) if (_held_out(n) == (s == "test"))] for s in ("train", "test")}

        self.fresh_train = fresh_train
        self._test_words = set(self.first["test"]) | set(self.last["test"]) | set(self.place["test"])

    def _fresh(self, rng, make):
        while True:
            w = make(rng)
            if 3 <= len(w) <= 12 and w not in self._test_words:
                return w

    def person(self, rng, split):
        if split == "train" and self.fresh_train:
            return (self._fresh(rng, lambda r: _word(r, r.choice([1, 2]))) + " " +
                    self._fresh(rng, lambda r: _word(r, r.choice([2, 2, 3]))))
        return rng.choice(self.first[split]) + " " + rng.choice(self.last[split])

    def place_of(self, rng, split):
        if split == "train" and self.fresh_train:
            return self._fresh(rng, lambda r: _word(r, r.choice([1, 2])) + r.choice(_PLACE_SUFFIX))
        return rng.choice(self.place[split])


def _held_out(v):
    return (v * 2654435761 >> 7) % 8 == 3


def make_passage(rng, pools, split, topic=None, person=None, place=None, noun=None, fact=None):
    """One passage: a dict with its text and the facts a question can ask for."""
    topic = topic or rng.choice(list(TOPICS))
    nouns = TOPICS[topic]["nouns"]
    noun = noun or rng.choice(nouns)
    noun2 = rng.choice([x for x in nouns if x != noun])
    person = person or pools.person(rng, split)
    place = place or pools.place_of(rng, split)
    year = rng.choice(pools.year[split])
    n = rng.choice(pools.n[split])
    fact_i = rng.randrange(len(FACTS[topic])) if fact is None else fact
    statement, _, unit = FACTS[topic][fact_i]
    last = person.split()[-1]
    sents = [rng.choice(OPENERS).format(year=year, person=person, noun=noun, place=place)]
    fill = [f.format(last=last, noun=noun, noun2=noun2, place=place) for f in rng.sample(FILLERS, 2)]
    fact = statement.format(n=n)
    order = rng.choice([[fact, fill[0]], [fill[0], fact], [fact, fill[0], fill[1]], [fill[0], fact, fill[1]]])
    text = " ".join(sents + order)
    return dict(text=text, topic=topic, noun=noun, person=person, place=place, year=year, n=n, fact=fact_i,
                unit=unit, title=f"{topic.title()} at {place}")


def make_question(rng, p, kind=None, forms=QUESTIONS):
    """A question about passage p from one of `forms` (of `kind`, or any): (kind, question, answer)."""
    forms = [q for q in forms if kind is None or q[0] == kind]
    kind, tmpl = rng.choice(forms)
    if kind == "how_many":
        _, q, unit = FACTS[p["topic"]][p["fact"]]
        return kind, q.format(place=p["place"]), f"{p['n']} {unit}"
    q = tmpl.format(noun=p["noun"], place=p["place"], person=p["person"])
    answer = {"who": p["person"], "when": str(p["year"]), "where": p["place"], "quote": p["text"]}[kind]
    return kind, q, answer


def _distractor(rng, pools, split, gold, hard, retrieval_like=False):
    """A passage that does not answer the gold question. Hard ones share the topic and one key; with
    retrieval_like they may also be what a retriever ranks next to the gold passage: the same topic
    and the same quantity sentence (other place, researcher and number)."""
    if not hard:
        return make_passage(rng, pools, split)
    choice = rng.randrange(4 if retrieval_like else 3)
    if choice == 3:
        return make_passage(rng, pools, split, topic=gold["topic"], fact=gold["fact"])
    if choice == 0:  # same researcher, other noun and place
        nouns = [x for x in TOPICS[gold["topic"]]["nouns"] if x != gold["noun"]]
        return make_passage(rng, pools, split, topic=gold["topic"], person=gold["person"], noun=rng.choice(nouns))
    if choice == 1:  # same place and topic, other researcher and noun
        nouns = [x for x in TOPICS[gold["topic"]]["nouns"] if x != gold["noun"]]
        return make_passage(rng, pools, split, topic=gold["topic"], place=gold["place"], noun=rng.choice(nouns))
    # same noun, other place and researcher
    return make_passage(rng, pools, split, topic=gold["topic"], noun=gold["noun"])


def _answers_question(p, gold, kind):
    """True when passage p could also answer the gold question (its keys all match)."""
    if kind in ("who", "quote"):
        return p["noun"] == gold["noun"] and p["place"] == gold["place"]
    if kind == "when":
        return p["person"] == gold["person"] and p["noun"] == gold["noun"] and p["place"] == gold["place"]
    if kind == "where":
        return p["person"] == gold["person"] and p["noun"] == gold["noun"]
    return p["place"] == gold["place"] and p["topic"] == gold["topic"]


def make_episode(rng, pools, split, n_passages, hard_fraction, keep_passages=False, retrieval_like=False,
                 forms=QUESTIONS):
    """A RAG episode: passages (one gold, the rest distractors), a question and its answer. With
    keep_passages the passages' facts are kept under "passage_facts" (for follow-up questions);
    retrieval_like adds the distractors a retriever puts next to the gold passage (_distractor)."""
    gold = make_passage(rng, pools, split)
    kind, question, answer = make_question(rng, gold, forms=forms)
    passages = [gold]
    while len(passages) < n_passages:
        d = _distractor(rng, pools, split, gold, rng.random() < hard_fraction, retrieval_like)
        if not _answers_question(d, gold, kind):
            passages.append(d)
    rng.shuffle(passages)
    ep = dict(passages=[p["text"] for p in passages], gold=passages.index(gold), kind=kind, question=question,
              answer=answer)
    if keep_passages:
        ep["passage_facts"] = passages
    return ep
