#!/usr/bin/env python3
"""Writes a synthetic but readable sample corpus for ragd demos and benchmarks.

Each document is about one topic (lighthouses, sourdough, glaciers, ...) and one invented place or
person, so documents on the same topic are still distinguishable. Formats rotate between .md,
.txt, .html and .jsonl (several records per .jsonl file). A few files that ingestion must skip
(binary, invalid UTF-8, empty) go to misc/ unless --no-bad is given.

    python3 examples/make_corpus.py --out data/corpus --docs 120 --seed 7

Standard library only; output is deterministic for a given --seed.
"""
import argparse
import html
import json
import os
import random

TOPICS = {
    "lighthouses": dict(
        nouns=["lantern", "fresnel lens", "keeper", "foghorn", "gallery", "tower", "rotation clockwork", "beacon",
               "reef", "shipping lane", "storm shutter", "oil store"],
        verbs=["guided", "warned", "illuminated", "signalled", "protected", "marked"],
        facts=["The light could be seen {n} nautical miles out to sea.",
               "Keepers climbed {n} steps each evening to trim the wick.",
               "The lens weighed close to {n} hundred kilograms and floated on a bath of mercury."]),
    "sourdough": dict(
        nouns=["starter", "levain", "crumb", "crust", "hydration", "autolyse", "banneton", "scoring blade",
               "rye flour", "proofing basket", "dutch oven", "fermentation"],
        verbs=["fed", "folded", "proofed", "shaped", "baked", "scored"],
        facts=["The baker kept the dough at {n} percent hydration.",
               "Bulk fermentation took about {n} hours at room temperature.",
               "The starter was fed every {n} hours with equal parts flour and water."]),
    "glaciers": dict(
        nouns=["ice sheet", "moraine", "crevasse", "meltwater", "firn", "calving front", "ablation zone", "cirque",
               "terminus", "ice core", "outwash plain", "serac"],
        verbs=["carved", "retreated", "advanced", "deposited", "scoured", "melted"],
        facts=["The terminus retreated {n} metres in a single summer.",
               "Ice cores from the summit held air bubbles {n} thousand years old.",
               "Meltwater discharge peaked at {n} cubic metres per second."]),
    "beekeeping": dict(
        nouns=["hive", "queen", "brood comb", "smoker", "nectar flow", "propolis", "swarm", "super", "drone",
               "worker bee", "honey extractor", "varroa mite"],
        verbs=["inspected", "harvested", "requeened", "split", "treated", "calmed"],
        facts=["A strong colony held about {n} thousand bees in midsummer.",
               "The apiary produced {n} kilograms of honey that year.",
               "Inspections happened every {n} days during the swarming season."]),
    "orbital mechanics": dict(
        nouns=["apoapsis", "periapsis", "delta-v budget", "Hohmann transfer", "inclination", "escape velocity",
               "gravity assist", "orbital period", "ascending node", "reaction wheel", "ion thruster", "launch window"],
        verbs=["raised", "circularised", "rendezvoused", "deorbited", "stabilised", "corrected"],
        facts=["The transfer burn needed {n} hundred metres per second of delta-v.",
               "One orbit took about {n} minutes at that altitude.",
               "The launch window opened every {n} months."]),
    "violin making": dict(
        nouns=["spruce top", "maple back", "f-hole", "bass bar", "soundpost", "varnish", "scroll", "purfling",
               "fingerboard", "bridge", "rib garland", "tonewood"],
        verbs=["carved", "graduated", "varnished", "glued", "tuned", "voiced"],
        facts=["The top plate was graduated to {n} millimetres at the centre.",
               "The varnish needed {n} coats and weeks of sunlight to cure.",
               "The workshop finished about {n} instruments a year."]),
    "tidal energy": dict(
        nouns=["tidal stream", "barrage", "turbine rotor", "slack water", "spring tide", "neap tide", "estuary",
               "sluice gate", "capacity factor", "subsea cable", "nacelle", "flow velocity"],
        verbs=["generated", "harnessed", "moored", "exported", "predicted", "maintained"],
        facts=["The array delivered {n} megawatts at peak flow.",
               "Currents in the channel reached {n} knots at spring tide.",
               "Each turbine was serviced every {n} years."]),
    "mushroom foraging": dict(
        nouns=["chanterelle", "spore print", "mycelium", "gill", "cap", "stipe", "morel", "porcini",
               "deciduous woodland", "field guide", "volva", "fruiting body"],
        verbs=["identified", "gathered", "dried", "photographed", "catalogued", "found"],
        facts=["The group recorded {n} species in one autumn morning.",
               "Chanterelles appeared about {n} days after heavy rain.",
               "A spore print takes roughly {n} hours to develop."]),
    "railway signalling": dict(
        nouns=["block section", "interlocking", "semaphore", "track circuit", "signal box", "points", "token",
               "axle counter", "distant signal", "level crossing", "train protection", "route setting"],
        verbs=["cleared", "locked", "routed", "detected", "protected", "released"],
        facts=["The signal box controlled {n} sets of points.",
               "Trains were held at least {n} block sections apart.",
               "The interlocking checked {n} conditions before clearing a route."]),
    "coral reefs": dict(
        nouns=["polyp", "zooxanthellae", "reef crest", "lagoon", "bleaching event", "parrotfish", "atoll",
               "spawning", "calcium carbonate", "fore reef", "sea urchin", "marine reserve"],
        verbs=["bleached", "recovered", "spawned", "surveyed", "restored", "colonised"],
        facts=["Water temperatures stayed {n} degrees above normal for weeks.",
               "The survey counted {n} fish species on a single transect.",
               "The reef grows only a few millimetres a year over {n} centuries."]),
    "compilers": dict(
        nouns=["parser", "abstract syntax tree", "register allocator", "intermediate representation",
               "optimisation pass", "basic block", "inliner", "type checker", "code generator", "linker",
               "constant folding", "loop unrolling"],
        verbs=["lowered", "optimised", "emitted", "inlined", "vectorised", "parsed"],
        facts=["The optimiser ran {n} passes over the intermediate representation.",
               "Inlining reduced call overhead by {n} percent in the benchmark.",
               "The register allocator handled functions with {n} thousand virtual registers."]),
    "medieval castles": dict(
        nouns=["keep", "curtain wall", "portcullis", "moat", "barbican", "arrow slit", "great hall", "bailey",
               "drawbridge", "garrison", "siege engine", "gatehouse"],
        verbs=["besieged", "fortified", "garrisoned", "rebuilt", "defended", "surrendered"],
        facts=["The curtain wall stood {n} metres high.",
               "The siege lasted {n} weeks before the garrison surrendered.",
               "The keep's walls were {n} metres thick at the base."]),
}

PLACES = ["Varnholm", "Oster Bay", "Kilmarren", "Saint Aubret", "Lindqvist Point", "Corrow", "Haverlea",
          "Montclair Ridge", "Isle of Tarrin", "Brackwater", "Eskdale Fen", "Port Sorrel", "Quenby", "Ardlow",
          "Felmere", "Tollan Sound", "Rookhaven", "Westmarch", "Duncaster", "Amberlow", "Kestrel Cove",
          "Norhill", "Pellworth", "Glenvarra", "Sablemoor", "Hollin Cross", "Ravensgate", "Cindermouth"]
PEOPLE = ["Ada Thorne", "Bram Okafor", "Clara Veldt", "Dmitri Sallow", "Elin Marsh", "Farid Quill",
          "Greta Holm", "Hugo Penn", "Ines Carvalho", "Jonah Reyes", "Kaia Lund", "Leon Abara", "Mira Castell",
          "Nils Ferrow", "Olga Brandt", "Pablo Serrat", "Rosa Imre", "Soren Vale", "Tilde Ross", "Uma Khatri"]
YEARS = list(range(1790, 2024))

OPENERS = [
    "In {year}, {person} began a long study of the {noun} at {place}.",
    "The {noun} at {place} has a history that few visitors know.",
    "{person} first wrote about the {noun} of {place} in {year}.",
    "Records from {place} describe how the {noun} {verb} the region for generations.",
]
SENTENCES = [
    "The {noun} {verb} the {noun2} more reliably than anyone expected.",
    "{person} noted that the {noun} depended on the {noun2} in ways that were easy to overlook.",
    "At {place}, the {noun} was usually inspected alongside the {noun2}.",
    "Local accounts say the {noun2} was rebuilt after a hard winter in {year}.",
    "Careful work on the {noun} meant the {noun2} rarely failed.",
    "Visitors to {place} often ask why the {noun} looks different from others of its kind.",
    "By {year}, the {noun2} had become the best documented part of the work.",
    "Measurements of the {noun} were kept in a ledger that still survives at {place}.",
    "{person} argued that the {noun2} mattered more than the {noun}.",
    "Changes to the {noun} were made slowly, one season at a time.",
]


def sentence(rng, topic, place, person, template=None):
    t = TOPICS[topic]
    noun, noun2 = rng.sample(t["nouns"], 2)
    tmpl = template or rng.choice(SENTENCES)
    s = tmpl.format(noun=noun, noun2=noun2, verb=rng.choice(t["verbs"]), place=place, person=person,
                    year=rng.choice(YEARS))
    return s[0].upper() + s[1:]


def document(rng, idx):
    topic = list(TOPICS)[idx % len(TOPICS)]
    place = PLACES[(idx * 7 + idx // len(TOPICS)) % len(PLACES)]
    person = PEOPLE[(idx * 3 + idx // len(PLACES)) % len(PEOPLE)]
    title = f"{topic.title()} at {place}: notes {idx + 1}"
    paragraphs = []
    for p in range(rng.randint(3, 7)):
        sents = [sentence(rng, topic, place, person, rng.choice(OPENERS) if p == 0 else None)]
        for _ in range(rng.randint(3, 6)):
            if rng.random() < 0.25:
                sents.append(rng.choice(TOPICS[topic]["facts"]).format(n=rng.randint(2, 90)))
            else:
                sents.append(sentence(rng, topic, place, person))
        paragraphs.append(" ".join(sents))
    return topic, title, paragraphs


def write_md(path, title, paragraphs, rng):
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"# {title}\n\n")
        for i, p in enumerate(paragraphs):
            if i and rng.random() < 0.3:
                f.write(f"## Part {i + 1}\n\n")
            f.write(p + "\n\n")


def write_txt(path, title, paragraphs):
    with open(path, "w", encoding="utf-8") as f:
        f.write(title + "\n\n" + "\n\n".join(paragraphs) + "\n")


def write_html(path, title, paragraphs):
    body = "\n".join(f"    <p>{html.escape(p)}</p>" for p in paragraphs)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"<!DOCTYPE html>\n<html>\n  <head><title>{html.escape(title)}</title>\n"
                f"  <style>body {{ font-family: serif; }}</style>\n"
                f"  <script>console.log('navigation script, not content');</script></head>\n"
                f"  <body>\n    <nav><a href=\"/\">Home</a></nav>\n    <h1>{html.escape(title)}</h1>\n{body}\n"
                f"  </body>\n</html>\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--docs", type=int, default=120, help="number of documents (default 120)")
    ap.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    ap.add_argument("--no-bad", action="store_true", help="do not write the files ingestion must skip")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    jsonl_records = []
    for i in range(args.docs):
        topic, title, paragraphs = document(rng, i)
        sub = os.path.join(args.out, topic.replace(" ", "_"))
        os.makedirs(sub, exist_ok=True)
        kind = i % 4
        stem = os.path.join(sub, f"doc{i:05d}")
        if kind == 0:
            write_md(stem + ".md", title, paragraphs, rng)
        elif kind == 1:
            write_txt(stem + ".txt", title, paragraphs)
        elif kind == 2:
            write_html(stem + ".html", title, paragraphs)
        else:
            jsonl_records.append({"id": f"record-{i:05d}", "title": title, "text": "\n\n".join(paragraphs)})
    for start in range(0, len(jsonl_records), 25):
        with open(os.path.join(args.out, f"records{start // 25:03d}.jsonl"), "w", encoding="utf-8") as f:
            for r in jsonl_records[start:start + 25]:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if not args.no_bad:
        misc = os.path.join(args.out, "misc")
        os.makedirs(misc, exist_ok=True)
        with open(os.path.join(misc, "firmware.txt"), "wb") as f:
            f.write(bytes(range(256)) * 4)
        with open(os.path.join(misc, "latin1.md"), "wb") as f:
            f.write("# Caf\u00e9 notes\n\nWritten in Latin-1, not UTF-8.\n".encode("latin-1"))
        open(os.path.join(misc, "empty.txt"), "w").close()
    total = 0
    for root, _, files in os.walk(args.out):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"wrote {args.docs} documents ({total / 1e3:.0f} KB) under {args.out}")


if __name__ == "__main__":
    main()
