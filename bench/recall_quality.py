"""Recall quality: Jaccard vs BM25 vs embedding-hybrid on a labelled synthetic memory set.

    .venv/bin/python bench/recall_quality.py            # full run (a few minutes)
    .venv/bin/python bench/recall_quality.py --quick    # fewer queries, no full-recall pass
    .venv/bin/python bench/recall_quality.py --speed    # only the speed figures
    .venv/bin/python bench/recall_quality.py --speed --compare   # backends side by side
    .venv/bin/python bench/recall_quality.py --backend onnx-int8 --quick   # another backend

The set (seeded, deterministic): memories made from ~30 everyday intents (a move for a job,
a pet, a commute, a coffee order, a course, a trip, ...), each written in three phrasings,
about the member or one of their people (sister, dad, "my friend Tomás", ...), with details
drawn from pools (cities, dishes, weekdays, instruments, ...). So every memory has many
near-duplicates: the same intent and wording with other details, the same details in
another intent, the same intent about another person. The 1k set is the first 1,000
memories of the 10k set; the 10k set has ten times as many near-duplicates of each target.

Queries are written from separate question templates, never from the memory text: they
paraphrase the intent ("which city did I go to for the bakery position?" for "I moved to
Lisbon in March for a job at a bakery"), and name one or two of the target's details, each
in a paraphrase when the pool has one ("bread shop" for "bakery", "the Portuguese capital"
for "Lisbon", "Japanese noodle soup" for "ramen"). A memory is relevant when it has the
query's intent, the query's person (when the question names one) and the details the
question names, so labels are exact even where several memories answer.

Each ranker ranks ALL memories of the set for each query. Reported: hit@k (any relevant in
the top k), recall@k (share of the relevant found), nDCG@k (binary gains), k = 3 and 12.
The headline table ranks by the semantic function alone; a second pass (unless --quick)
runs the full `memory.recall.resolve` with recency, references and origin made equal for
every memory (assistant surface, budget 12) and reports its hit@12 as a cross-check.

Queries are split 30/70 into dev and test (seeded).
`memory.recall.ranking.semantic.HYBRID_LEXICAL_WEIGHT` was chosen on dev; every figure
printed is on test. The script re-runs the dev grid and says if it would now choose another
weight.

Speed: write-time batch throughput (texts/s), query-embedding latency on one thread, the
latency of embedding one 24-word memory body as a write does, and the exhaustive hybrid
recall at 10k including the query embedding. `--compare` times every installed backend
(numpy, onnx, onnx-int8) in alternating rounds, since this machine's speed drifts.

The encoder backend is `memory.recall.ranking.embedding.choose_backend()`'s
(IRIS_EMBEDDING_BACKEND, else ONNX Runtime when installed) unless `--backend` names one;
every JSON line carries it, and the cached set embeddings are keyed by it.

Prints a table and one JSON line per (size, ranker) and per speed figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import statistics
import string
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from consent.enums import Category  # noqa: E402
from memory.enums import Lifecycle, Origin, ProvenanceKind, RecallSurface, ScopeKind  # noqa: E402
from memory.recall.pipeline import (  # noqa: E402
    Candidate,
    ProvenanceLink,
    RecallRequest,
    jaccard_semantic,
    resolve,
    tokens,
)
from memory.recall.ranking import embedding, semantic  # noqa: E402
from memory.rules.lexical import Bm25Index  # noqa: E402

SEED = 20260611
SIZES = (1_000, 10_000)
QUERIES_PER_SIZE = 600
DEV_SHARE = 0.3
KS = (3, 12)
PARAPHRASE_SHARE = 0.6  # how often a detail with a paraphrase is asked in its paraphrase
MAX_RELEVANT = 3  # a question must single its target out from all but a few equals
WEIGHT_GRID = [round(i * 0.05, 2) for i in range(21)]
CACHE_DIR = ROOT / "var" / "bench"

# Reference points from the issue (same kind of set, other implementations), top-12 hit.
REFERENCE = {
    "mem0 2.2.1": {1_000: 0.91, 10_000: 0.53},
    "BM25": {1_000: 0.86, 10_000: 0.74},
    "Jaccard": {1_000: 0.74, 10_000: 0.66},
}

# --------------------------------------------------------------------------------------
# Detail pools: "canonical | paraphrase | paraphrase"; memories use the canonical form.


def pool(spec: str) -> tuple[tuple[str, ...], ...]:
    """`"canonical | paraphrase; canonical; ..."` → ((canonical, paraphrase, ...), ...)."""
    entries = (e.strip() for e in spec.split(";"))
    return tuple(tuple(" ".join(p.split()) for p in e.split("|")) for e in entries if e)


POOLS: dict[str, tuple[tuple[str, ...], ...]] = {
    "city": pool(
        """
        Lisbon | the Portuguese capital; Porto; Madrid | the Spanish capital; Seville; Valencia;
        Barcelona; Lyon; Marseille; Bordeaux; Nantes; Berlin | the German capital; Hamburg;
        Munich; Leipzig; Vienna | the Austrian capital; Prague | the Czech capital; Krakow;
        Warsaw | the Polish capital; Budapest | the Hungarian capital; Zagreb; Athens | the
        Greek capital; Naples; Turin; Bologna; Milan; Florence; Dublin | the Irish capital;
        Cork; Glasgow; Edinburgh | the Scottish capital; Leeds; Bristol; Manchester; Cardiff |
        the Welsh capital; Oslo | the Norwegian capital; Bergen; Stockholm | the Swedish
        capital; Gothenburg; Helsinki | the Finnish capital; Copenhagen | the Danish capital;
        Aarhus; Amsterdam | the Dutch capital; Utrecht; Antwerp; Ghent; Montreal; Toronto;
        Vancouver
        """
    ),
    "month": pool(
        """
        January; February; March; April; May; June; July; August; September; October; November;
        December
        """
    ),
    "weekday": pool("Monday; Tuesday; Wednesday; Thursday; Friday; Saturday; Sunday"),
    "day": pool(
        """
        1st; 2nd; 3rd; 4th; 5th; 6th; 7th; 8th; 9th; 10th; 11th; 12th; 13th; 14th; 15th; 16th;
        17th; 18th; 19th; 20th; 21st; 22nd; 23rd; 24th; 25th; 26th; 27th; 28th
        """
    ),
    "year": pool(
        """
        2006; 2007; 2008; 2009; 2010; 2011; 2012; 2013; 2014; 2015; 2016; 2017; 2018; 2019;
        2020; 2021; 2022; 2023; 2024
        """
    ),
    "workplace": pool(
        """
        a bakery | a bread shop; a bookshop | a bookstore; an architecture studio | a design
        practice; a software startup | a young tech company; a primary school | an
        elementary school; a car factory | an automotive plant; a newspaper | a daily paper;
        an airline | an air carrier; a supermarket chain | a grocery retailer; a university |
        a college; a brewery | a beer maker; a flower shop | a florist; a coffee roastery | a
        coffee roaster; a shipyard | a boatyard; a theatre | a playhouse; a hotel | a
        guesthouse; a publishing house | a book publisher; a marketing agency | an advertising
        firm; a rail company | a train operator; a radio station | a broadcaster; the city
        council | the local government office; a bike shop | a cycle store; a toy company | a
        toy maker; a museum | a gallery
        """
    ),
    "dish": pool(
        """
        ramen | Japanese noodle soup; paella | Spanish rice dish; pho | Vietnamese noodle soup;
        tacos al pastor | pork tacos; lasagne | baked pasta; pierogi | Polish dumplings; goulash
        | Hungarian stew; moussaka | Greek aubergine bake; falafel | chickpea fritters; pad thai
        | Thai fried noodles; risotto | creamy rice; sushi | raw fish rolls; bibimbap | Korean
        rice bowl; shakshuka | eggs poached in tomato sauce; dal | lentil curry; fish and chips
        | battered cod; dim sum | Chinese dumplings; carbonara | egg and bacon pasta; tiramisu |
        coffee dessert; pastel de nata | custard tart; katsu curry | breaded cutlet curry;
        jollof rice | West African tomato rice; churros | fried dough sticks; biryani | spiced
        rice; gnocchi | potato dumplings; poke | raw fish bowl; croissants | French pastries;
        burritos | stuffed tortillas
        """
    ),
    "pet": pool(
        """
        golden retriever | retriever; greyhound | racing dog; border collie | sheepdog;
        dachshund | sausage dog; beagle | hound; pug; labrador | lab; corgi; tabby cat | striped
        cat; Siamese cat; Maine Coon | big fluffy cat; rabbit | bunny; guinea pig | cavy;
        tortoise; parrot | talking bird; budgie | budgerigar; hamster; goldfish | pet fish;
        gecko | lizard; ferret
        """
    ),
    "petname": pool(
        """
        Biscuit; Pixel; Mango; Luna; Olive; Pepper; Ziggy; Noodle; Bramble; Juniper; Waffles;
        Miso; Pretzel; Clementine; Bagel; Gizmo; Maple; Hazel; Rocket; Dumpling; Sprout; Pickle;
        Nacho; Toffee; Basil; Indigo; Pudding; Crumble; Figaro; Captain
        """
    ),
    "hobby": pool(
        """
        pottery | ceramics; bouldering | indoor climbing; salsa | latin dance; life drawing |
        figure sketching; karate | martial arts; choir | group singing; fencing | sword
        fighting; woodworking | carpentry; watercolour | painting; improv | improvised comedy;
        badminton; tennis; swimming | laps at the pool; running club | jogging group; knitting |
        yarn crafts; photography | taking pictures; archery | bow shooting; rowing; calligraphy
        | hand lettering; judo; capoeira; chess; table tennis | ping pong; yoga
        """
    ),
    "instrument": pool(
        """
        cello; violin | fiddle; drums | drum kit; ukulele | uke; saxophone | sax; trumpet;
        guitar; bass guitar | bass; flute; harp; accordion | squeezebox; clarinet; banjo;
        harmonica | mouth organ; mandolin; trombone; piano
        """
    ),
    "profession": pool(
        """
        an architect | a building designer; a teacher | an educator; an electrician | a sparky;
        an accountant | a bookkeeper; a chef | a cook; a software developer | a programmer; a
        journalist | a reporter; a pilot | an aviator; a plumber; a librarian; a graphic
        designer | an illustrator; a firefighter; a translator | an interpreter; a carpenter | a
        joiner; a barista; a tour guide; a civil engineer | an engineer; a data analyst | an
        analyst; a baker; a gardener | a landscaper
        """
    ),
    "language": pool(
        """
        Japanese; Portuguese; German; Italian; Korean; Mandarin | Chinese; Arabic; Dutch;
        Swedish; Greek; Turkish; Polish; Hindi; Swahili; Welsh; Finnish; Czech; Hebrew;
        Vietnamese; Spanish; French
        """
    ),
    "method": pool(
        """
        private tutor | personal teacher; phone app | app on the phone; evening class | night
        school; podcast | audio lessons; language exchange partner | conversation buddy;
        textbook | workbook; online course | internet class
        """
    ),
    "colour": pool(
        """
        red | scarlet; blue; green; yellow; black; white; silver | grey; orange; purple |
        violet; teal | blue-green; burgundy | dark red; beige | cream
        """
    ),
    "car": pool(
        """
        Honda Jazz; Toyota Yaris; Volkswagen Golf | VW hatchback; Ford Fiesta; Renault Clio;
        Fiat Panda; Skoda Octavia; Volvo estate | Swedish estate car; Mini Cooper | Mini; Nissan
        Leaf | electric Nissan; Tesla Model 3 | Tesla; Peugeot 208; Kia Niro; Citroen Berlingo |
        Citroen van
        """
    ),
    "time": pool(
        """
        6:40; 6:45 | quarter to seven; 7:05; 7:15 | quarter past seven; 7:30 | half seven; 7:42;
        8:05; 8:15 | quarter past eight; 8:30 | half past eight; 9:10
        """
    ),
    "transport": pool(
        """
        train | rail service; tram | streetcar; ferry | boat; metro | underground; bus; night
        bus; express coach | long-distance bus; cable car | gondola
        """
    ),
    "drink": pool(
        """
        flat white; cappuccino; latte | milky coffee; cortado; espresso | short black; americano
        | long black; chai latte | spiced tea; matcha latte | green tea latte; hot chocolate |
        cocoa; mocha | chocolate coffee; earl grey | bergamot tea; rooibos | red bush tea
        """
    ),
    "milk": pool(
        """
        oat milk | oat; soy milk | soya; almond milk | almond; whole milk | full-fat milk;
        skimmed milk | low-fat milk; coconut milk | coconut
        """
    ),
    "team": pool(
        """
        Riverside Rovers; Northgate United; Harbour City; Eastfield Athletic; Kingsbridge
        Wanderers; Millbrook Town; Westport Rangers; Lakeside Lions; Stonebridge Albion;
        Fairhaven Rams
        """
    ),
    "sport": pool("football | soccer; rugby; basketball | hoops; ice hockey | hockey; cricket"),
    "genre": pool(
        """
        thriller | suspense; fantasy | sword and sorcery; crime | detective; romance | love
        story; science fiction | sci-fi; historical | period; horror | scary; memoir | life
        story
        """
    ),
    "author": pool(
        """
        Mara Ellison; Tobias Renner; Ines Carvalho; Daniel Okoro; Hana Sato; Lukas Brandt; Amara
        Nwosu; Felix Moreau; Sofia Lindqvist; Ravi Menon; Clara Vidal; Jonah Whitfield; Elif
        Demir; Pavel Novak; Grace Adeyemi; Nils Holm
        """
    ),
    "race": pool(
        """
        half marathon | 21k; marathon; 10k run | ten kilometre race; triathlon; ultramarathon |
        ultra; charity bike ride | cycling sportive; open water swim | lake swim; trail race |
        mountain run; obstacle race | mud run
        """
    ),
    "course": pool(
        """
        accounting | bookkeeping; web design | building websites; creative writing | fiction
        writing; art history; Italian cooking | pasta making; data science | statistics;
        interior design | decorating; film studies | cinema; bookbinding; astronomy |
        stargazing; philosophy; economics; sign language | signing; upholstery | furniture
        restoring
        """
    ),
    "landmark": pool(
        """
        harbour | port; castle | fortress; lake; river | riverbank; cathedral | big church;
        market square | town square; lighthouse; railway station | train station; football
        stadium | sports ground; forest | woods; beach | seaside; old mill | watermill; vineyard
        | wine estate; airport | airfield
        """
    ),
    "home": pool(
        """
        flat | apartment; terraced house | row house; houseboat | canal boat; cottage; studio |
        bedsit; loft | converted warehouse; semi-detached house | semi; bungalow | single-storey
        house; cabin
        """
    ),
    "neighbourhood": pool(
        """
        Old Town; Riverside; Harbourside; Northfield; Greenhill; Market Quarter; Westbank;
        Eastgate; Canal Quarter; Hillcrest; Southmead; Brookvale
        """
    ),
    "org": pool(
        """
        food bank | food pantry; animal shelter | pet rescue; community garden | allotment
        project; public library | library; youth football club | kids' soccer team; repair cafe
        | fix-it workshop; soup kitchen | free meal service; wildlife trust | nature reserve;
        charity shop | thrift store; literacy project | reading programme
        """
    ),
    "avoid": pool(
        """
        mushrooms | fungi; coriander | cilantro; olives; blue cheese | stilton; anchovies |
        small salty fish; raisins | dried grapes; aubergine | eggplant; chilli | spicy heat;
        mayonnaise | mayo; beetroot | beets; celery; onions; garlic; pickles | gherkins
        """
    ),
    "show": pool(
        """
        Glass Houses; The Cartographer; Night Ferry; Paper Crowns; Low Tide; The Quiet Garden;
        Signal Fire; Northern Line; Half Moon Bay; Salt and Stone; The Orchard; Red Meridian;
        Copper Sky; Lantern Street
        """
    ),
    "showgenre": pool(
        """
        crime drama | detective series; baking contest | cooking competition; nature documentary
        | wildlife programme; sitcom | comedy; period drama | costume drama; space opera |
        science fiction; reality show | reality TV; anime | Japanese animation; history
        documentary | history programme; legal drama | courtroom series
        """
    ),
    "activity": pool(
        """
        scuba diving | diving; skiing; hiking | trekking; surfing | wave riding; sailing |
        yachting; cycling | bike touring; snorkelling | reef swimming; climbing |
        mountaineering; kayaking | paddling; camping | tent camping; wine tasting | vineyard
        visits
        """
    ),
    "country": pool(
        """
        Portugal; Spain; Italy; Greece; Croatia; Norway; Iceland; Japan; Vietnam; Thailand;
        Mexico; Peru; Morocco; Kenya; New Zealand; Canada; Scotland; Ireland; Turkey; Georgia
        """
    ),
    "name": pool(
        """
        Alex; Jordan; Sam; Noor; Mateo; Yuki; Chloe; Ibrahim; Freya; Diego; Leila; Oskar; Priya;
        Tariq; Zoe; Marco; Aisha; Finn; Elena; Kwame; Mei; Rafael; Ingrid; Omar
        """
    ),
    "venue": pool(
        """
        a friend's wedding | a wedding reception; a climbing gym | a bouldering wall; a book
        club | a reading group; university | college; a music festival | a festival; a work
        conference | a business event; a dinner party | a friend's dinner; a salsa class | a
        dance lesson; a night train | a sleeper train; a pub quiz | a trivia night; the dog park
        | a park for dogs; a hackathon | a coding event
        """
    ),
    "room": pool(
        """
        kitchen; bedroom; front door; hallway | entrance hall; bathroom; study | home office;
        living room | lounge; garden shed | shed; spare room | guest room; staircase | stairs
        """
    ),
    "plant": pool(
        """
        tomatoes; basil; strawberries; chillies | hot peppers; lettuce | salad greens;
        courgettes | zucchini; mint; lavender; sunflowers; peas; runner beans | green beans;
        rosemary
        """
    ),
    "gplace": pool(
        """
        balcony; windowsill | window ledge; allotment | community plot; back garden | backyard;
        rooftop | roof terrace; greenhouse | glasshouse
        """
    ),
    "gift": pool(
        """
        fountain pen | nice pen; record player | turntable; pair of hiking boots | pair of
        walking boots; e-reader | Kindle; cast-iron pan | skillet; telescope; espresso
        machine | coffee maker; smartwatch; wool scarf | warm scarf; houseplant | potted
        plant; board game; camera
        """
    ),
    "occasion": pool(
        """
        Christmas; Easter; graduation; Eid; Diwali; Hanukkah; the housewarming | the new-home
        party; retirement | leaving work; Valentine's Day; Mother's Day
        """
    ),
    "music": pool(
        """
        jazz; K-pop | Korean pop; techno | electronic music; folk | acoustic songs; opera |
        arias; reggae; bossa nova | Brazilian jazz; heavy metal | metal; classical music |
        orchestral music; hip hop | rap; synth-pop | eighties pop; country music | country and
        western
        """
    ),
    "chore": pool(
        """
        cooking | making dinner; cleaning the house | tidying up; running | jogging; driving |
        behind the wheel; studying | revising; ironing | pressing clothes; commuting | on the
        way to work; showering | in the shower; doing the dishes | washing up
        """
    ),
}

# --------------------------------------------------------------------------------------
# Intents: memory phrasings and question phrasings. Subject placeholders: {Who}/{who}
# ("I", "my sister", "my friend Tomás"), {Sposs}/{sposs} ("my", "my sister's"), {poss}
# ("my", "her", "his"), {obj} ("me", "her", "him"); "[a|b]" picks a for "I", b otherwise.

INTENTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "relocation": (
        (
            "{Who} moved to {city} in {month} for a job at {workplace}.",
            "In {month} {who} relocated to {city} to start at {workplace}.",
            "{Who} [have|has] been living in {city} since {month}, working for {workplace}.",
        ),
        (
            "Which city did {who} go to for the position at {workplace}?",
            "When did {who} settle in {city}?",
            "What company did {who} join after the move to {city}?",
            "Where [am|is] {who} based for the job at {workplace}?",
        ),
    ),
    "food_place": (
        (
            "{Who} [love|loves] the {dish} at a tiny family restaurant in {city}.",
            "The best {dish} {who} [have|has] ever eaten was in {city}.",
            "Whenever {who} [am|is] in {city}, {who} [go|goes] straight for {dish}.",
        ),
        (
            "Where did {who} have that amazing {dish}?",
            "What dish [do|does] {who} rave about from {city}?",
            "Which town has the {dish} {who} [like|likes] so much?",
        ),
    ),
    "pet": (
        (
            "{Who} [have|has] a {pet} called {petname}.",
            "{Sposs} {pet} {petname} turns four next month.",
            "{petname}, {sposs} {pet}, sleeps on the sofa all day.",
        ),
        (
            "What kind of animal is {petname}?",
            "What did {who} name {poss} {pet}?",
            "Tell me about {sposs} {pet}.",
        ),
    ),
    "hobby_day": (
        (
            "{Who} [go|goes] to a {hobby} class every {weekday} evening.",
            "{weekday} nights are for {hobby}; {who} never [miss|misses] a session.",
            "{Who} signed up for {hobby} on {weekday}s at the community centre.",
        ),
        (
            "On which evening [do|does] {who} do {hobby}?",
            "What class [do|does] {who} attend on {weekday}s?",
            "When is {sposs} weekly {hobby} session?",
        ),
    ),
    "instrument": (
        (
            "{Who} started learning the {instrument} in {year}.",
            "{Who} [have|has] played the {instrument} since {year}.",
            "Back in {year} {who} picked up the {instrument} and never stopped.",
        ),
        (
            "How long [have|has] {who} been playing the {instrument}?",
            "What instrument did {who} take up in {year}?",
            "When did {who} begin {instrument} lessons?",
        ),
    ),
    "birthday": (
        (
            "{Sposs} birthday is on the {day} of {month}.",
            "Every year on {month} {day}, {who} [celebrate|celebrates] {poss} birthday.",
            "{Sposs} birthday falls on {month} {day}, remember the cake.",
        ),
        (
            "Whose birthday is on {month} {day}?",
            "Does {sposs} birthday fall in {month}?",
            "Who was born on the {day} of {month}?",
        ),
    ),
    "job": (
        (
            "{Who} [work|works] as {profession} in {city}.",
            "{Sposs} job: {profession} at a firm in {city}.",
            "{Who} [have|has] been {profession} in {city} for years.",
        ),
        (
            "What [do|does] {who} do for a living in {city}?",
            "Where [do|does] {who} work as {profession}?",
            "Which of my people is {profession}?",
        ),
    ),
    "language": (
        (
            "{Who} [am|is] learning {language} with a {method}.",
            "{Who} [practise|practises] {language} every day using a {method}.",
            "To brush up on {language}, {who} [have|has] been working with a {method}.",
        ),
        (
            "How [am|is] {who} studying {language}?",
            "Which language [am|is] {who} picking up with the {method}?",
            "What [am|is] {who} doing to improve {poss} {language}?",
        ),
    ),
    "car": (
        (
            "{Sposs} car is a {colour} {car}.",
            "{Who} [drive|drives] a {colour} {car}.",
            "{Who} bought a second-hand {colour} {car} last year.",
        ),
        (
            "What colour is {sposs} {car}?",
            "Who drives the {colour} {car}?",
            "What vehicle [do|does] {who} own, the {colour} one?",
        ),
    ),
    "commute": (
        (
            "{Who} [take|takes] the {time} {transport} to work.",
            "Every weekday {who} [catch|catches] the {time} {transport}.",
            "{Sposs} commute starts with the {time} {transport}.",
        ),
        (
            "What time [do|does] {who} leave on the {transport}?",
            "How [do|does] {who} get to the office at {time}?",
            "Which departure [do|does] {who} ride on the {transport} each morning?",
        ),
    ),
    "coffee": (
        (
            "{Who} always [order|orders] a {drink} with {milk}.",
            "{Sposs} usual is a {drink} made with {milk}.",
            "{Who} only [drink|drinks] {drink} if there is {milk}.",
        ),
        (
            "How [do|does] {who} like {poss} {drink}?",
            "What [do|does] {who} get with {milk}?",
            "What is {sposs} cafe order with {milk}?",
        ),
    ),
    "team": (
        (
            "{Who} [support|supports] {team} and never [miss|misses] a {sport} match.",
            "{Who} [have|has] a season ticket for {team}, the local {sport} club.",
            "Saturdays mean {sport}: {who} [follow|follows] {team} home and away.",
        ),
        (
            "[Do|Does] {who} go to {team} games?",
            "Who is the {team} fan?",
            "Which {sport} side [do|does] {who} cheer for?",
        ),
    ),
    "reading": (
        (
            "{Who} [am|is] reading a {genre} novel by {author}.",
            "{Sposs} current book is a {genre} by {author}.",
            "{Who} can't put down the new {genre} from {author}.",
        ),
        (
            "What [am|is] {who} reading by {author}?",
            "Which writer is behind the {genre} book {who} [am|is] into?",
            "Who is in the middle of an {author} book?",
        ),
    ),
    "trip": (
        (
            "{Who} [am|is] planning a trip to {city} in {month}.",
            "In {month} {who} will be visiting {city} for a week.",
            "{Sposs} holiday to {city} is booked for {month}.",
        ),
        (
            "When [am|is] {who} heading to {city}?",
            "Where [am|is] {who} travelling in {month}?",
            "What are {sposs} travel plans for {city}?",
        ),
    ),
    "race": (
        (
            "{Who} [am|is] training for a {race} in {city} this {month}.",
            "{Who} signed up for the {month} {race} in {city}.",
            "{Sposs} goal is to finish the {race} in {city} in {month}.",
        ),
        (
            "Which event [am|is] {who} preparing for in {city}?",
            "Where is {sposs} {race}?",
            "What race [am|is] {who} doing in {month}?",
        ),
    ),
    "course": (
        (
            "{Who} [am|is] taking an evening course in {course} on {weekday}s.",
            "{Who} enrolled in a {course} class that meets every {weekday}.",
            "On {weekday}s {who} [study|studies] {course} at the adult college.",
        ),
        (
            "When [do|does] {who} have {poss} {course} lessons?",
            "What [am|is] {who} studying on {weekday} nights?",
            "Which night is {sposs} {course} class?",
        ),
    ),
    "childhood": (
        (
            "{Who} grew up in {city}, right next to the {landmark}.",
            "{Sposs} childhood was spent in {city} near the {landmark}.",
            "As a kid {who} lived by the {landmark} in {city}.",
        ),
        (
            "Which town did {who} grow up in, near the {landmark}?",
            "What was close to {sposs} childhood home in {city}?",
            "Did {who} grow up close to a {landmark}?",
        ),
    ),
    "home": (
        (
            "{Who} [live|lives] in a {home} in the {neighbourhood} district.",
            "{Sposs} place is a {home} over in {neighbourhood}.",
            "{Who} [rent|rents] a small {home} in {neighbourhood}.",
        ),
        (
            "What kind of place [do|does] {who} have in {neighbourhood}?",
            "Where is {sposs} {home}?",
            "Which part of town [do|does] {who} live in, in the {home}?",
        ),
    ),
    "volunteering": (
        (
            "{Who} [volunteer|volunteers] at the {org} every {weekday}.",
            "{weekday} mornings {who} [help|helps] out at the {org}.",
            "{Who} [give|gives] time to the {org} on {weekday}s.",
        ),
        (
            "Where [do|does] {who} help on {weekday}s?",
            "When [do|does] {who} go to the {org}?",
            "What day is {sposs} shift at the {org}?",
        ),
    ),
    "food_avoid": (
        (
            "{Who} [love|loves] {dish} but only without {avoid}.",
            "No {avoid} in {sposs} {dish}, please.",
            "{Who} always [ask|asks] for {dish} with the {avoid} left out.",
        ),
        (
            "What [do|does] {who} want left out of {poss} {dish}?",
            "Which dish [do|does] {who} order without {avoid}?",
            "Who can't have {avoid} in their {dish}?",
        ),
    ),
    "show": (
        (
            "{Who} [am|is] hooked on {show}, a {showgenre}.",
            "{Who} [have|has] been binge-watching the {showgenre} {show}.",
            "{Sposs} favourite series right now is {show}, a {showgenre}.",
        ),
        (
            "Which {showgenre} [am|is] {who} watching?",
            "Who has been watching {show}?",
            "What kind of series is {show}?",
        ),
    ),
    "holiday": (
        (
            "Last summer {who} went {activity} in {country}.",
            "{Who} spent two weeks {activity} in {country} last year.",
            "The best trip {who} ever took was {activity} in {country}.",
        ),
        (
            "Where did {who} go {activity} on holiday?",
            "What did {who} do in {country} last year?",
            "Which country did {who} visit for {activity}?",
        ),
    ),
    "partner": (
        (
            "{Who} met {name} at {venue} in {year}.",
            "{Who} first ran into {name} at {venue} back in {year}.",
            "It was at {venue} in {year} that {who} met {name}.",
        ),
        (
            "Where did {who} meet {name}?",
            "How did {who} get to know {name}?",
            "Who did {who} meet at {venue}?",
        ),
    ),
    "paint": (
        (
            "{Who} painted {poss} {room} {colour} last spring.",
            "{Sposs} {room} is {colour} now, after a weekend of painting.",
            "{Who} chose {colour} for the {room} walls.",
        ),
        (
            "What colour is {sposs} {room}?",
            "Which room did {who} do in {colour}?",
            "What shade did {who} pick for the {room}?",
        ),
    ),
    "garden": (
        (
            "{Who} [grow|grows] {plant} on the {gplace}.",
            "The {gplace} is where {who} [keep|keeps] {poss} {plant}.",
            "Every summer {who} [plant|plants] {plant} on the {gplace}.",
        ),
        (
            "Where [do|does] {who} grow {plant}?",
            "What [do|does] {who} cultivate on the {gplace}?",
            "What's growing on {sposs} {gplace}?",
        ),
    ),
    "wakeup": (
        (
            "On {weekday}s {who} [get|gets] up at {time}.",
            "{Who} [set|sets] an alarm for {time} every {weekday}.",
            "{weekday} is an early day: {who} [am|is] up by {time}.",
        ),
        (
            "When [do|does] {who} wake on {weekday}s?",
            "Which day [do|does] {who} rise at {time}?",
            "How early [do|does] {who} start on {weekday}?",
        ),
    ),
    "gift": (
        (
            "{Who} would love a {gift} for {occasion}.",
            "For {occasion}, {sposs} wish is a {gift}.",
            "A {gift} is top of {sposs} list for {occasion}.",
        ),
        (
            "What present would {who} like for {occasion}?",
            "Who wants a {gift}?",
            "Which holiday is the {gift} meant for?",
        ),
    ),
    "music": (
        (
            "{Who} [listen|listens] to {music} while {chore}.",
            "{music} is what {who} [put|puts] on when {chore}.",
            "{Who} can't do {chore} without some {music} playing.",
        ),
        (
            "What music [do|does] {who} play {chore}?",
            "When [do|does] {who} put on {music}?",
            "What's {sposs} soundtrack for {chore}?",
        ),
    ),
}

RELATIONS = (
    ("sister", "she"),
    ("brother", "he"),
    ("mum", "she"),
    ("dad", "he"),
    ("daughter", "she"),
    ("son", "he"),
    ("grandmother", "she"),
    ("grandfather", "he"),
    ("aunt", "she"),
    ("uncle", "he"),
    ("wife", "she"),
    ("husband", "he"),
)
FRIENDS = (
    ("Tomás", "he"),
    ("Priyanka", "she"),
    ("Jonas", "he"),
    ("Amelia", "she"),
    ("Kofi", "he"),
    ("Hiroshi", "he"),
    ("Beatriz", "she"),
    ("Olga", "she"),
    ("Dmitri", "he"),
    ("Sinead", "she"),
    ("Rahul", "he"),
    ("Lucia", "she"),
    ("Magnus", "he"),
    ("Fatima", "she"),
    ("Emeka", "he"),
    ("Hannah", "she"),
    ("Luis", "he"),
    ("Ana", "she"),
    ("Wei", "he"),
    ("Ottilie", "she"),
)

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_CONJUGATION = re.compile(r"\[([^|\]]*)\|([^\]]*)\]")
_SUBJECT_FIELDS = frozenset({"Who", "who", "Sposs", "sposs", "poss", "obj"})


@dataclass(frozen=True, slots=True)
class Subject:
    key: str
    who: str
    sposs: str
    poss: str
    obj: str
    first_person: bool


def subjects() -> tuple[Subject, ...]:
    out = [Subject("me", "I", "my", "my", "me", True)]
    for rel, pronoun in RELATIONS:
        his = "her" if pronoun == "she" else "his"
        out.append(
            Subject(rel, f"my {rel}", f"my {rel}'s", his, his if his == "her" else "him", False)
        )
    for name, pronoun in FRIENDS:
        his = "her" if pronoun == "she" else "his"
        out.append(
            Subject(
                f"friend:{name}",
                f"my friend {name}",
                f"my friend {name}'s",
                his,
                "her" if pronoun == "she" else "him",
                False,
            )
        )
    return tuple(out)


SUBJECTS = subjects()


def draw_subject(rng: random.Random) -> Subject:
    roll = rng.random()
    if roll < 0.35:
        return SUBJECTS[0]
    if roll < 0.8:
        return rng.choice(SUBJECTS[1 : 1 + len(RELATIONS)])
    return rng.choice(SUBJECTS[1 + len(RELATIONS) :])


def render(template: str, subject: Subject | None, values: dict[str, str]) -> str:
    first = subject.first_person if subject is not None else False
    text = _CONJUGATION.sub(lambda m: m.group(1) if first else m.group(2), template)
    fields = dict(values)
    if subject is not None:
        fields.update(
            Who=subject.who[0].upper() + subject.who[1:],
            who=subject.who,
            Sposs=subject.sposs[0].upper() + subject.sposs[1:],
            sposs=subject.sposs,
            poss=subject.poss,
            obj=subject.obj,
        )
    text = string.Formatter().vformat(text, (), fields)
    return text[0].upper() + text[1:]


def slots_of(template: str) -> tuple[set[str], bool]:
    names = set(_PLACEHOLDER.findall(template))
    uses_subject = bool(names & _SUBJECT_FIELDS) or bool(_CONJUGATION.search(template))
    return names - _SUBJECT_FIELDS, uses_subject


def _check_templates() -> None:
    for intent, (memories, queries) in INTENTS.items():
        slot_sets = [slots_of(t)[0] for t in memories]
        for t, names in zip(memories, slot_sets, strict=True):
            assert names == slot_sets[0], f"{intent}: memory templates disagree on slots: {t}"
            assert names <= POOLS.keys(), f"{intent}: unknown slot in {t}"
        for q in queries:
            names, _ = slots_of(q)
            assert names and names <= slot_sets[0], f"{intent}: query names no slot: {q}"


# --------------------------------------------------------------------------------------
# The labelled set


@dataclass(frozen=True, slots=True)
class Memory:
    index: int
    entry_id: str
    intent: str
    subject: str
    values: tuple[tuple[str, str], ...]  # (slot, canonical value)
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    target: int
    relevant: frozenset[int]
    split: str  # "dev" or "test"
    paraphrased_details: int
    mentioned: int


def build_memories(count: int, seed: int = SEED) -> list[Memory]:
    _check_templates()
    rng = random.Random(seed)
    names = sorted(INTENTS)
    out: list[Memory] = []
    for i in range(count):
        intent = rng.choice(names)
        memory_templates = INTENTS[intent][0]
        template = rng.choice(memory_templates)
        subject = draw_subject(rng)
        slots = sorted(slots_of(template)[0])
        values = {s: rng.choice(POOLS[s])[0] for s in slots}
        out.append(
            Memory(
                index=i,
                entry_id=f"m{i:05d}",
                intent=intent,
                subject=subject.key,
                values=tuple(sorted(values.items())),
                text=render(template, subject, values),
            )
        )
    return out


def build_queries(memories: Sequence[Memory], count: int, seed: int) -> list[Query]:
    """`count` questions, each about one target memory and answered by at most
    `MAX_RELEVANT` memories (a question that cannot single its target out is not asked)."""
    rng = random.Random(seed)
    by_subject = {s.key: s for s in SUBJECTS}
    paraphrases = {s: {e[0]: e[1:] for e in entries} for s, entries in POOLS.items()}
    memory_texts = {m.text.casefold() for m in memories}
    by_intent: dict[str, list[tuple[Memory, dict[str, str]]]] = {}
    for m in memories:
        by_intent.setdefault(m.intent, []).append((m, dict(m.values)))
    order = list(range(len(memories)))
    rng.shuffle(order)
    out: list[Query] = []
    for target_index in order:
        if len(out) == count:
            break
        target = memories[target_index]
        values = dict(target.values)
        templates = list(INTENTS[target.intent][1])
        rng.shuffle(templates)
        for template in templates:
            mentioned, uses_subject = slots_of(template)
            relevant = frozenset(
                m.index
                for m, m_values in by_intent[target.intent]
                if (not uses_subject or m.subject == target.subject)
                and all(m_values[s] == values[s] for s in mentioned)
            )
            if len(relevant) <= MAX_RELEVANT:
                break
        else:
            continue
        assert target.index in relevant
        shown: dict[str, str] = {}
        paraphrased = 0
        for slot in sorted(mentioned):
            alternatives = paraphrases[slot][values[slot]]
            if alternatives and rng.random() < PARAPHRASE_SHARE:
                shown[slot] = rng.choice(alternatives)
                paraphrased += 1
            else:
                shown[slot] = values[slot]
        text = render(template, by_subject[target.subject] if uses_subject else None, shown)
        assert text.casefold() not in memory_texts, text
        out.append(
            Query(
                text=text,
                target=target.index,
                relevant=relevant,
                split="dev" if rng.random() < DEV_SHARE else "test",
                paraphrased_details=paraphrased,
                mentioned=len(mentioned),
            )
        )
    if len(out) < count:
        raise RuntimeError(f"only {len(out)} targets can be singled out; asked for {count}")
    return out


# --------------------------------------------------------------------------------------
# Rankers over the whole set: each returns the top `k` memory indices for a query.

Ranking = Callable[[Query], list[int]]
TOP = max(KS)


def top_indices(scores: np.ndarray, k: int = TOP) -> list[int]:
    """Score descending, then index ascending (a stable sort), like recall's entry-id
    tie-break: ids are `m00000`, `m00001`, ... in index order."""
    return np.argsort(-scores, kind="stable")[:k].tolist()


class Rankers:
    """The rankers over one set, as dense score vectors over every memory."""

    def __init__(
        self, memories: Sequence[Memory], matrix: np.ndarray, encoder: embedding.Encoder
    ) -> None:
        self.memories = memories
        self.size = len(memories)
        self.ids = [m.entry_id for m in memories]
        self.bm25 = Bm25Index((m.entry_id, m.text) for m in memories)
        self.token_sets = [tokens(m.text) for m in memories]
        self.token_counts = np.array([len(t) for t in self.token_sets], dtype=np.float64)
        postings: dict[str, list[int]] = {}
        for i, toks in enumerate(self.token_sets):
            for t in toks:
                postings.setdefault(t, []).append(i)
        self.postings = {t: np.array(p, dtype=np.int64) for t, p in postings.items()}
        self.matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        self.encoder = encoder
        self._row = {m.entry_id: m.index for m in memories}

    def jaccard(self, query: str) -> np.ndarray:
        # recall.jaccard_semantic through postings (only memories sharing a token score
        # above zero); `main` spot-checks it against the real function.
        q = tokens(query)
        shared = np.zeros(self.size, dtype=np.float64)
        for t in q:
            hits = self.postings.get(t)
            if hits is not None:
                shared[hits] += 1.0
        if not q:
            return shared
        return shared / (len(q) + self.token_counts - shared)

    def lexical(self, query: str) -> np.ndarray:
        out = np.zeros(self.size, dtype=np.float64)
        for d, score in self.bm25.normalised_scores(query).items():
            out[self._row[d]] = score
        return out

    def cosine(self, query: str) -> np.ndarray:
        q = self.encoder.encode_one(query)
        return np.einsum("ij,j->i", self.matrix, q).astype(np.float64)

    @staticmethod
    def blend(lexical: np.ndarray, cosine: np.ndarray, weight: float) -> np.ndarray:
        # memory.recall.ranking.semantic.hybrid, elementwise (same IEEE operations, same values)
        return weight * lexical + (1.0 - weight) * np.maximum(cosine, 0.0)


# --------------------------------------------------------------------------------------
# Metrics


def metrics(ranked: Sequence[int], relevant: frozenset[int], k: int) -> tuple[float, float, float]:
    top = ranked[:k]
    hits = [1.0 if i in relevant else 0.0 for i in top]
    hit = 1.0 if any(hits) else 0.0
    recall = sum(hits) / len(relevant)
    dcg = sum(h / math.log2(rank + 2) for rank, h in enumerate(hits))
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(k, len(relevant))))
    return hit, recall, dcg / ideal


def evaluate(rank: Ranking, queries: Sequence[Query]) -> dict[str, float]:
    sums: dict[str, float] = {}
    for q in queries:
        ranked = rank(q)
        for k in KS:
            hit, recall, ndcg = metrics(ranked, q.relevant, k)
            sums[f"hit@{k}"] = sums.get(f"hit@{k}", 0.0) + hit
            sums[f"recall@{k}"] = sums.get(f"recall@{k}", 0.0) + recall
            sums[f"ndcg@{k}"] = sums.get(f"ndcg@{k}", 0.0) + ndcg
    return {name: round(total / len(queries), 4) for name, total in sorted(sums.items())}


# --------------------------------------------------------------------------------------
# Full recall pass: memory.recall.resolve with every non-semantic term equal

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
TENANT, MEMBER = "t-bench", "u-bench"


def candidates_of(memories: Sequence[Memory]) -> list[Candidate]:
    stamp = NOW - timedelta(days=3)
    link = (ProvenanceLink(ProvenanceKind.SESSION_TURN, "turn-0", stamp),)
    return [
        Candidate(
            entry_id=m.entry_id,
            tenant_id=TENANT,
            user_id=MEMBER,
            scope_kind=ScopeKind.PROFILE,
            scope_key=f"profile:{MEMBER}",
            category=Category.PREFERENCE,
            body=m.text,
            subject=None,
            origin=Origin.USER_STATED,
            lifecycle=Lifecycle.ACTIVE,
            suppression=None,
            multi_actor=None,
            provenance_chain=link,
            reference_count=0,
            last_referenced_at=None,
            created_at=stamp,
            updated_at=stamp,
            revision=1,
            external=False,
        )
        for m in memories
    ]


def recall_request(query: str) -> RecallRequest:
    return RecallRequest(
        tenant_id=TENANT,
        user_id=MEMBER,
        scope_kind=ScopeKind.PROFILE,
        scope_key=f"profile:{MEMBER}",
        query=query,
        surface=RecallSurface.ASSISTANT,
        context="general",
        crisis_frame=False,
        safety_critical_context=False,
        consented_categories=frozenset(),
        multi_actor_sensitive_consent=False,
        dsar_fulfillment=False,
        limit=None,
        now=NOW,
    )


# --------------------------------------------------------------------------------------
# Embeddings of the set, cached on disk (var/bench/) by a digest of the texts and model


def set_embeddings(
    encoder: embedding.Encoder, texts: Sequence[str]
) -> tuple[np.ndarray, float | None]:
    digest = hashlib.sha256()
    model_file = encoder.directory / "model.safetensors"
    digest.update(f"{model_file.stat().st_size}:{embedding.MAX_TOKENS}".encode())
    if encoder.backend != "numpy":  # numpy keeps the key its cached files were saved under
        digest.update(f":{encoder.backend}".encode())
    if encoder.backend == "onnx-int8":
        from memory.recall.ranking import embedding_onnx

        digest.update(f":{embedding_onnx.INT8_SCHEME}".encode())
    for t in texts:
        digest.update(t.encode())
        digest.update(b"\0")
    path = CACHE_DIR / f"minilm-{digest.hexdigest()[:16]}.npy"
    if path.is_file():
        return np.load(path), None
    start = time.perf_counter()
    matrix = encoder.encode(texts)
    seconds = time.perf_counter() - start
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, matrix)
    return matrix, len(texts) / seconds


# --------------------------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


BACKEND = {"name": "?"}  # the encoder backend of this run, set by main()


def emit(record: dict[str, object]) -> None:
    print(json.dumps({"backend": BACKEND["name"], **record}, sort_keys=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 queries, no full-recall pass")
    parser.add_argument("--queries", type=int, default=None, help="queries per size")
    parser.add_argument("--speed", action="store_true", help="only the speed figures")
    parser.add_argument(
        "--backend", choices=embedding.BACKENDS, default=None, help="encoder backend"
    )
    parser.add_argument(
        "--compare", action="store_true", help="with --speed: every backend, alternating"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds for --compare")
    args = parser.parse_args()
    per_size = args.queries or (200 if args.quick else QUERIES_PER_SIZE)

    reason = embedding.unavailable_reason()
    if reason is not None:
        sys.exit(f"recall_quality needs the embedding model: {reason}")
    encoder = embedding.Encoder.load(query_threads=1, backend=args.backend)
    encoder.warm_up()
    BACKEND["name"] = encoder.backend
    print(f"# encoder backend: {encoder.backend}")

    everything = build_memories(max(SIZES))
    if args.speed and args.compare:
        compare_backends(everything, args.rounds)
        return
    if args.speed:
        speed(encoder, everything, None, {})
        return
    full_matrix, throughput = set_embeddings(encoder, [m.text for m in everything])
    weight = semantic.HYBRID_LEXICAL_WEIGHT
    print(
        f"# recall quality: seed {SEED}, {len(INTENTS)} intents, {len(SUBJECTS)} people, "
        f"hybrid = {weight} * lexical + {1 - weight:.2f} * cosine"
    )

    results: dict[int, dict[str, dict[str, float]]] = {}
    dev_grid: dict[float, list[float]] = {w: [] for w in WEIGHT_GRID}
    latencies: dict[int, dict[str, list[float]]] = {}
    for size in SIZES:
        memories = everything[:size]
        queries = build_queries(memories, per_size, seed=SEED + size)
        dev = [q for q in queries if q.split == "dev"]
        test = [q for q in queries if q.split == "test"]
        rankers = Rankers(memories, full_matrix[:size], encoder)
        describe(size, memories, dev, test, rankers)
        results[size], by_weight = semantic_pass(size, queries, dev, test, rankers, weight)
        for w, value in by_weight.items():
            dev_grid[w].append(value)
        if not args.quick:
            latencies[size] = recall_pass(size, memories, test, rankers, encoder, results)

    print_table(results)
    best = max(
        WEIGHT_GRID, key=lambda w: (round(statistics.mean(dev_grid[w]), 4), -abs(w - weight))
    )
    print(
        "\n# dev grid, mean of hit@12 and nDCG@12 over both sizes: "
        + ", ".join(f"{w}: {statistics.mean(v):.3f}" for w, v in dev_grid.items())
    )
    note = "agrees" if best == weight else f"differs: dev now prefers {best}"
    print(f"# shipped HYBRID_LEXICAL_WEIGHT {weight}; the dev grid {note}")
    emit(
        {
            "bench": "recall_quality",
            "mode": "dev-grid",
            "best_weight": best,
            "shipped_weight": weight,
        }
    )

    speed(encoder, everything, throughput, latencies)


def semantic_pass(
    size: int,
    queries: Sequence[Query],
    dev: Sequence[Query],
    test: Sequence[Query],
    rankers: Rankers,
    weight: float,
) -> tuple[dict[str, dict[str, float]], dict[float, float]]:
    """Rank by each semantic function alone; grid the hybrid weight on dev."""
    # The postings shortcut must give recall.jaccard_semantic's values.
    sample = candidates_of(rankers.memories[:200])
    for q in test[:10]:
        fast = rankers.jaccard(q.text)
        for c in sample:
            assert abs(jaccard_semantic(q.text, c) - fast[int(c.entry_id[1:])]) < 1e-12

    lexical = {q.text: rankers.lexical(q.text) for q in queries}
    cosine = {q.text: rankers.cosine(q.text) for q in queries}

    def hybrid_at(w: float) -> Ranking:
        return lambda q: top_indices(Rankers.blend(lexical[q.text], cosine[q.text], w))

    by_weight = {}
    for w in WEIGHT_GRID:
        scores = evaluate(hybrid_at(w), dev)
        by_weight[w] = (scores["hit@12"] + scores["ndcg@12"]) / 2

    ranked_by: dict[str, Ranking] = {
        "jaccard": lambda q: top_indices(rankers.jaccard(q.text)),
        "lexical": lambda q: top_indices(lexical[q.text]),
        "dense": lambda q: top_indices(np.maximum(cosine[q.text], 0.0)),
        "hybrid": hybrid_at(weight),
    }
    results: dict[str, dict[str, float]] = {}
    for name, rank in ranked_by.items():
        scores = evaluate(rank, test)
        results[name] = scores
        emit(
            {
                "bench": "recall_quality",
                "mode": "semantic",
                "size": size,
                "ranker": name,
                "queries": len(test),
                **scores,
            }
        )
    return results, by_weight


def describe(
    size: int,
    memories: Sequence[Memory],
    dev: Sequence[Query],
    test: Sequence[Query],
    rankers: Rankers,
) -> None:
    per_intent: dict[str, int] = {}
    for m in memories:
        per_intent[m.intent] = per_intent.get(m.intent, 0) + 1
    relevant = [len(q.relevant) for q in test]
    overlap = [
        len(tokens(q.text) & rankers.token_sets[q.target])
        / max(1, len(tokens(q.text) | rankers.token_sets[q.target]))
        for q in test
    ]
    same_person = [
        sum(
            1
            for m in memories
            if m.intent == memories[q.target].intent and m.subject == memories[q.target].subject
        )
        for q in test
    ]
    paraphrased = sum(q.paraphrased_details for q in test) / sum(q.mentioned for q in test)
    same_intent = statistics.mean(per_intent[memories[q.target].intent] for q in test)
    print(
        f"\n## {size} memories: {len(test)} test queries ({len(dev)} dev); relevant per "
        f"query mean {statistics.mean(relevant):.2f} (max {max(relevant)}); memories sharing "
        f"the target's intent mean {same_intent:.0f}, "
        f"its intent and person {statistics.mean(same_person):.1f}; query-target token "
        f"Jaccard mean {statistics.mean(overlap):.2f}; details asked in a paraphrase "
        f"{paraphrased:.0%}"
    )
    for q in test[:3]:
        print(f"#   query {q.text!r} -> target {memories[q.target].text!r}")


def recall_pass(
    size: int,
    memories: Sequence[Memory],
    test: Sequence[Query],
    rankers: Rankers,
    encoder: embedding.Encoder,
    results: dict[int, dict[str, dict[str, float]]],
) -> dict[str, list[float]]:
    """Rank through the pipeline's resolve with the semantic preparers; time hybrid."""
    candidates = candidates_of(memories)
    vectors = semantic.VectorIndex(rankers.ids, rankers.matrix)
    index_of = {m.entry_id: m.index for m in memories}
    timings: dict[str, list[float]] = {"prepare": [], "resolve": []}
    for name in ("jaccard", "lexical", "hybrid"):
        prepare = semantic.semantic_for(name)
        if name == "hybrid":
            prepare = partial(semantic.hybrid, encoder=encoder)
            encoder.clear_cache()  # so the timing includes each query's embedding

        def through_recall(
            q: Query, prepare: semantic.Ranker = prepare, name: str = name
        ) -> list[int]:
            start = time.perf_counter()
            fn = prepare(q.text, candidates, corpus=rankers.bm25, vectors=vectors)
            prepared = time.perf_counter()
            result = resolve(
                candidates,
                recall_request(q.text),
                semantic=fn,
                relevance_floor=semantic.relevance_floor(name),
            )
            if name == "hybrid":
                timings["prepare"].append(prepared - start)
                timings["resolve"].append(time.perf_counter() - prepared)
            return [index_of[e.candidate.entry_id] for e in result.entries]

        scores = evaluate(through_recall, test)
        results[size][f"{name} via recall"] = scores
        emit(
            {
                "bench": "recall_quality",
                "mode": "recall",
                "size": size,
                "ranker": name,
                "queries": len(test),
                **scores,
            }
        )
    return timings


def print_table(results: dict[int, dict[str, dict[str, float]]]) -> None:
    print("\n| set | ranker | hit@3 | hit@12 | recall@3 | recall@12 | nDCG@3 | nDCG@12 |")
    print("|---|---|---|---|---|---|---|---|")
    for size, by_ranker in results.items():
        for name, s in by_ranker.items():
            print(
                f"| {size // 1000}k | {name} | {s['hit@3']:.3f} | {s['hit@12']:.3f} | "
                f"{s['recall@3']:.3f} | {s['recall@12']:.3f} | {s['ndcg@3']:.3f} | "
                f"{s['ndcg@12']:.3f} |"
            )
    for ref, by_size in REFERENCE.items():
        print(
            f"| 1k / 10k | {ref} (issue) | | {by_size[1_000]:.2f} / {by_size[10_000]:.2f} | | | | |"
        )


def speed(
    encoder: embedding.Encoder,
    memories: Sequence[Memory],
    throughput: float | None,
    recall_timings: dict[int, dict[str, list[float]]],
) -> None:
    """Wall-clock figures, and CPU time of the measuring thread beside them: on a shared
    machine the wall clock also counts time spent waiting for a core."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n## speed (load average {load} on {os.cpu_count()} cores)")
    texts = [m.text for m in memories[:2000]]
    for threads in (None, 1):
        timed = embedding.Encoder.load(batch_threads=threads, backend=encoder.backend)
        timed.warm_up()
        wall, cpu = time.perf_counter(), time.process_time()
        timed.encode(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        label = "all cores" if threads is None else "1 thread"
        print(
            f"write-time batch encode ({label}): {len(texts) / wall:.0f} texts/s "
            f"({len(texts) / cpu:.0f} texts per CPU-second)"
        )
        emit(
            {
                "bench": "embedding",
                "what": "batch_encode",
                "threads": threads or os.cpu_count(),
                "texts": len(texts),
                "texts_per_s": round(len(texts) / wall, 1),
                "texts_per_cpu_s": round(len(texts) / cpu, 1),
            }
        )
    if throughput is not None:
        print(f"(the 10k set itself encoded at {throughput:.0f} texts/s)")

    queries = build_queries(memories[:1000], 300, seed=SEED + 7)
    lengths = [encoder.token_count(q.text) for q in queries]
    wall_ms: list[float] = []
    cpu_ms: list[float] = []
    for q in queries:
        wall, cpu = time.perf_counter(), time.thread_time()
        encoder.encode_one(q.text, cache=False)
        cpu_ms.append((time.thread_time() - cpu) * 1000)
        wall_ms.append((time.perf_counter() - wall) * 1000)
    hits: list[float] = []
    for q in queries[:100]:
        encoder.encode_one(q.text)
        start = time.perf_counter()
        encoder.encode_one(q.text)
        hits.append((time.perf_counter() - start) * 1e6)
    figures = {p: round(percentile(wall_ms, p), 3) for p in (50, 95, 99)}
    cpu_figures = {p: round(percentile(cpu_ms, p), 3) for p in (50, 95)}
    print(
        f"query embedding, one thread, uncached: p50 {figures[50]:.2f} ms, p95 "
        f"{figures[95]:.2f} ms, p99 {figures[99]:.2f} ms wall; CPU p50 {cpu_figures[50]:.2f} "
        f"ms, p95 {cpu_figures[95]:.2f} ms (queries of {min(lengths)}-{max(lengths)} "
        f"tokens, median {int(np.median(lengths))}); cache hit p50 "
        f"{percentile(hits, 50):.1f} us"
    )
    emit(
        {
            "bench": "embedding",
            "what": "query_latency",
            "threads": 1,
            "p50_ms": figures[50],
            "p95_ms": figures[95],
            "p99_ms": figures[99],
            "cpu_p50_ms": cpu_figures[50],
            "cpu_p95_ms": cpu_figures[95],
            "median_tokens": int(np.median(lengths)),
            "cache_hit_p50_us": round(percentile(hits, 50), 1),
        }
    )
    write_ms = []
    for _ in range(200):
        start = time.perf_counter()
        encoder.encode([MEMORY_BODY])
        write_ms.append((time.perf_counter() - start) * 1000)
    print(
        f"one memory body ({encoder.token_count(MEMORY_BODY)} tokens), encode([text]): p50 "
        f"{percentile(write_ms, 50):.2f} ms, p95 {percentile(write_ms, 95):.2f} ms"
    )
    emit(
        {
            "bench": "embedding",
            "what": "write_latency",
            "threads": 1,
            "tokens": encoder.token_count(MEMORY_BODY),
            "p50_ms": round(percentile(write_ms, 50), 3),
            "p95_ms": round(percentile(write_ms, 95), 3),
        }
    )
    for size, timings in recall_timings.items():
        prepare = [t * 1000 for t in timings["prepare"]]
        resolve_ms = [t * 1000 for t in timings["resolve"]]
        total = [a + b for a, b in zip(prepare, resolve_ms, strict=True)]
        print(
            f"exhaustive hybrid recall over all {size} memories (pure pipeline, no database): "
            f"hybrid semantic values incl. query embedding p50 {percentile(prepare, 50):.1f} / "
            f"p95 {percentile(prepare, 95):.1f} ms; resolve p50 "
            f"{percentile(resolve_ms, 50):.1f} / p95 {percentile(resolve_ms, 95):.1f} ms; "
            f"total p95 {percentile(total, 95):.1f} ms"
        )
        emit(
            {
                "bench": "recall_quality",
                "what": "hybrid_recall_latency",
                "size": size,
                "semantic_p50_ms": round(percentile(prepare, 50), 2),
                "semantic_p95_ms": round(percentile(prepare, 95), 2),
                "resolve_p50_ms": round(percentile(resolve_ms, 50), 2),
                "resolve_p95_ms": round(percentile(resolve_ms, 95), 2),
                "total_p95_ms": round(percentile(total, 95), 2),
            }
        )


# A memory body of 24 words (28 tokens), embedded as a write does it (one text per call).
MEMORY_BODY = (
    "I moved to Lisbon in March for a job at a bakery near the river, "
    "and I walk there every morning with my dog."
)


def compare_backends(memories: Sequence[Memory], rounds: int) -> None:
    """Every installed backend, one thread, uncached, alternating in `rounds` rounds (each
    round: 300 short questions, 100 single-body writes, a 500-text batch per backend), so a
    drift in the machine's speed hits all of them alike."""
    names = [n for n in embedding.BACKENDS if n == "numpy" or embedding.onnx_available()]
    encoders = {n: embedding.Encoder.load(backend=n, cache_size=0) for n in names}
    for enc in encoders.values():
        enc.warm_up()
    questions = [q.text for q in build_queries(memories[:1000], 300, seed=SEED + 7)]
    texts = [m.text for m in memories[:500]]
    query_ms: dict[str, list[float]] = {n: [] for n in names}
    write_ms: dict[str, list[float]] = {n: [] for n in names}
    batch_rate: dict[str, list[float]] = {n: [] for n in names}
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n## backends compared, {rounds} rounds (load average {load})")
    for _ in range(rounds):
        for name, enc in encoders.items():
            for text in questions:
                start = time.perf_counter()
                enc.encode_one(text, cache=False)
                query_ms[name].append((time.perf_counter() - start) * 1000)
            for _ in range(100):
                start = time.perf_counter()
                enc.encode([MEMORY_BODY])
                write_ms[name].append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            enc.encode(texts)
            batch_rate[name].append(len(texts) / (time.perf_counter() - start))
    print("| backend | query p50 ms | query p95 ms | encode([body]) p50 / p95 ms | batch texts/s |")
    print("|---|---|---|---|---|")
    for name in names:
        q, w = query_ms[name], write_ms[name]
        print(
            f"| {name} | {percentile(q, 50):.2f} | {percentile(q, 95):.2f} | "
            f"{percentile(w, 50):.2f} / {percentile(w, 95):.2f} | "
            f"{statistics.median(batch_rate[name]):.0f} |"
        )
        BACKEND["name"] = name
        emit(
            {
                "bench": "embedding",
                "what": "backend_compare",
                "rounds": rounds,
                "threads": 1,
                "query_p50_ms": round(percentile(q, 50), 3),
                "query_p95_ms": round(percentile(q, 95), 3),
                "write_p50_ms": round(percentile(w, 50), 3),
                "write_p95_ms": round(percentile(w, 95), 3),
                "batch_texts_per_s": round(statistics.median(batch_rate[name]), 1),
            }
        )
    reference = encoders.get("onnx") or encoders["numpy"]
    sample = questions[:100] + texts[:100]
    base = np.stack([reference.encode_one(t) for t in sample])
    for name, enc in encoders.items():
        if enc is reference:
            continue
        cos = (np.stack([enc.encode_one(t) for t in sample]) * base).sum(axis=1)
        print(
            f"cosine {name} vs {reference.backend} on {len(sample)} texts: mean "
            f"{cos.mean():.5f}, min {cos.min():.5f}"
        )


if __name__ == "__main__":
    main()
