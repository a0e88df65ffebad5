"""Small English datasets for probing what each layer of a pre-trained model knows (notebook 07).

Every sentence was written for the course: real English, lower-case, already split into
words, punctuation as words of its own ("the match ended in a draw ."), 5 to 13 words
long and without apostrophes (so that WordPiece splits no word into odd pieces). Everything is
deterministic: the data are fixed lists, the random choices use `random.Random(seed)`.

Three datasets of real English, and one in the review world:

* Part of speech in context, `pos_probe_examples()`: 32 words that are a noun in one
  sentence and a verb in another ("we went to see a play" / "the children love to play"),
  each in 6 sentences as a NOUN and 6 as a VERB: 384 examples, 192 of each label. The
  split into train and test is by word: 24 words (288 examples) to train, the 8 words of
  `POS_TEST_WORDS` (96 examples) to test. A probe cannot pass the test by remembering
  which words are nouns: it has never seen the test words, and each of them is a noun
  exactly as often as a verb. It must read the context. `pos_probe_examples(seed=k)` draws
  the 8 test words at random instead; `by="occurrence"` splits each word's sentences
  instead, so that every word is on both sides (what a control task needs, notebook 07).
* Bigram shift (SentEval), `bigram_shift_examples()`: the 488 distinct sentences of this
  module (`probe_sentences()`); in half of them two adjacent words are swapped (never the
  first word, never punctuation), label 1 = swapped. 366 to train, 122 to test, split by
  sentence and balanced in each split (183/183 and 61/61). A swap leaves the bag of words
  unchanged, so anything that sums word vectors, even plus position vectors, is blind to it.
* Self-similarity, `context_sentences()`: 13 words, 8 sentences each (104 sentences) with
  the word exactly once. Seven words have two senses, 4 sentences each (bank, bat,
  light, spring, match, plant, bark: `POLYSEMOUS`); six have one (doctor, coffee, window,
  guitar, elephant, bread: `MONOSEMOUS`).

Every target word is a single token of an uncased BERT vocabulary (all-MiniLM-L6-v2's).

* Review-world probes, `review_probe_examples()`: word class (noun or adjective) and
  sentiment (of an adjective) in sentences of the review grammar, split by word type in
  folds, for probing the course's own tiny BERT at each step of its pre-training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import NamedTuple

__all__ = [
    "POS_WORDS",
    "POS_TEST_WORDS",
    "POLYSEMOUS",
    "MONOSEMOUS",
    "Split",
    "PosExample",
    "ShiftExample",
    "ContextExample",
    "pos_probe_examples",
    "probe_sentences",
    "swap_bigram",
    "bigram_shift_examples",
    "context_sentences",
    "review_probe_examples",
]


class Split(NamedTuple):
    """A fixed train/test split: `train, test = task` or `task.train`, `task.test`."""

    train: list
    test: list


@dataclass
class PosExample:
    """One occurrence of an ambiguous word: `words[index] == word`, label "NOUN" or "VERB"."""

    words: list[str]
    index: int
    word: str
    label: str


@dataclass
class ShiftExample:
    """A sentence for bigram shift: label 1 if words `position` and `position + 1` were swapped.

    `original` is the sentence before the swap (equal to `words` when label is 0, and then
    `position` is None).
    """

    words: list[str]
    label: int
    position: int | None
    original: list[str]


@dataclass
class ContextExample:
    """One sentence with `words[index] == word`; sense is None for a word with one sense."""

    words: list[str]
    index: int
    word: str
    sense: str | None


# ----------------------------------------------------------------------------
# Part of speech in context

# word: (6 sentences where it is a noun, 6 where it is a verb). Both lists put the word
# at the same positions (sorted, the two lists of indices are equal): a probe on layer 0
# sees the word and its position, and neither may give the label away.
_POS_SENTENCES = {
    "play": (
        ["we went to see a play at the old theatre last night .",
         "the school play was about a king who lost his crown .",
         "her new play opens in london next spring .",
         "the actors rehearsed the play for six weeks .",
         "that was the best play of the whole football season .",
         "my grandfather wrote a play when he was young ."],
        ["the children love to play in the garden after school .",
         "can you play the piano ?",
         "we often play football on saturday mornings .",
         "my little brother will play the guitar at the wedding .",
         "sadly , they did not play well in the second half .",
         "after dinner let us play a game of cards ."]),
    "watch": (
        ["my father gave me his old watch before he died .",
         "she looked at her watch and started to walk faster .",
         "the watch on his wrist stopped at midnight .",
         "i lost my watch somewhere on the beach .",
         "this watch was made in switzerland .",
         "the soldier kept watch at the gate all night ."],
        ["we like to watch old films on rainy evenings .",
         "they watch the news every evening .",
         "please watch the baby while i make dinner .",
         "they sat on the hill to watch the sunset .",
         "the little birds watch the cat from the fence .",
         "in winter you should watch your step on icy paths ."]),
    "book": (
        ["she is reading a book about the history of china .",
         "the book on the table belongs to my sister .",
         "his first book sold millions of copies .",
         "i borrowed this book from the library .",
         "every book in the store was half price .",
         "the old book smelled of dust and coffee ."],
        ["we need to book a table for six people .",
         "you can book tickets online or at the station .",
         "did they book a hotel near the airport ?",
         "we book our holidays in january every year .",
         "please book me a taxi for eight in the morning .",
         "many of our guests book their rooms months in advance ."]),
    "light": (
        ["the light in the kitchen is still on .",
         "the light through the curtains woke her early .",
         "turn off the light before you go to bed .",
         "the morning light was soft and golden .",
         "a small light flashed on the dashboard .",
         "plants need light and warmth to grow ."],
        ["we light candles on the table every friday .",
         "can you light the fire in the living room ?",
         "they will light the torch at the opening ceremony .",
         "please light the gas stove for me .",
         "scouts learn to light a fire without matches .",
         "i cannot light the barbecue in this wind ."]),
    "run": (
        ["i go for a run along the river every morning .",
         "he scored the winning run in the last game .",
         "after a long run she drank a litre of juice .",
         "the show had a successful run on broadway .",
         "the morning run left everyone tired but happy .",
         "a short run before breakfast wakes me up ."],
        ["the dogs run across the field to greet us .",
         "you have to run to catch the last bus .",
         "i can run five kilometres without stopping .",
         "my aunt and uncle run a small bakery in the village .",
         "the children must not run in the corridor .",
         "next week the team will run the experiment again ."]),
    "ring": (
        ["he gave her a diamond ring on their anniversary .",
         "the ring was too small for her finger .",
         "she wears a silver ring on her left hand .",
         "the boxer stepped into the ring to loud cheers .",
         "a ring of mountains surrounds the valley .",
         "i found my lost ring under the sofa ."],
        ["please ring me when you arrive at the station .",
         "they ring their grandmother every weekend .",
         "the old church bells ring every sunday morning .",
         "yesterday i forgot to ring the doctor about my cough .",
         "when we arrive i will ring the bell .",
         "before you leave you should ring the hotel ."]),
    "train": (
        ["the train to edinburgh leaves at nine .",
         "we missed the last train home .",
         "she fell asleep on the train and missed her stop .",
         "a freight train rolled slowly past the village .",
         "the night train was full of students .",
         "my son loves his wooden toy train ."],
        ["athletes train for years before the olympics .",
         "we also train dogs to find people in the snow .",
         "you must train every day for a marathon .",
         "the sailing club will train new volunteers in march .",
         "at this small airport they train young pilots .",
         "it can take many months to train a guide dog ."]),
    "fly": (
        ["a fly landed on my sandwich .",
         "the fly buzzed around the kitchen all afternoon .",
         "he could not catch the fly with his hand .",
         "there is a dead fly in my soup .",
         "the angler tied a bright fly to his line .",
         "a single fly can carry many germs ."],
        ["birds fly south for the winter .",
         "we fly to lisbon on friday .",
         "i would love to fly a plane one day .",
         "the children fly kites on the beach .",
         "in the autumn most geese fly in a v shape .",
         "my grandmother is afraid to fly ."]),
    "park": (
        ["we had a picnic in the park on sunday .",
         "the park near our house has a small lake .",
         "in the park children were playing football .",
         "a new park opened in the city centre .",
         "the national park is home to bears and wolves .",
         "she takes the dog around the park every evening ."],
        ["you can park your car behind the hotel .",
         "on match days we had to park far from the stadium .",
         "do not park in front of the gate .",
         "they park their bikes outside the library .",
         "visitors to the old town should park by the river .",
         "i will park near the entrance ."]),
    "face": (
        ["her face lit up when she saw the puppy .",
         "he washed his face with cold water .",
         "his face was painted like a clown .",
         "the north face of the mountain is very steep .",
         "i will never forget her face .",
         "a friendly face greeted us at the door ."],
        ["we must face the truth about the accident .",
         "the rooms face the sea .",
         "they face a difficult choice now .",
         "farmers face a long dry summer .",
         "the two teams face each other in the final .",
         "honestly , i could not face another meeting ."]),
    "match": (
        ["we saw the match on television .",
         "the match ended in a draw .",
         "he struck a match to see in the dark cellar .",
         "the final match of the season was sold out .",
         "she won the tennis match in three sets .",
         "a single match can start a forest fire ."],
        ["these socks do not match .",
         "the curtains match the sofa perfectly .",
         "the police match fingerprints with a computer .",
         "please match each word with its meaning .",
         "your new shoes match your bag .",
         "few players can match her speed ."]),
    "answer": (
        ["the answer to the question is on page ten .",
         "i wrote my answer on the back of the paper .",
         "her answer surprised everyone in the room .",
         "there is no easy answer to this problem .",
         "he gave a clever answer .",
         "the correct answer was written on the board ."],
        ["please answer the phone while i am out .",
         "she did not answer my letter .",
         "they answer every email within a day .",
         "can you answer the last question ?",
         "after lunch i will answer your questions .",
         "all the students must answer ten questions ."]),
    "change": (
        ["the change in the weather surprised us .",
         "keep the change , she said to the driver .",
         "a small change can make a big difference .",
         "there has been a change of schedule .",
         "climate change affects every country .",
         "the new manager brought a change in attitude ."],
        ["people rarely change their habits .",
         "we change trains in paris .",
         "you can change the settings on your phone .",
         "i change my clothes before dinner .",
         "in the autumn leaves change colour .",
         "luckily , they did not change the date of the wedding ."]),
    "drink": (
        ["would you like a drink before dinner ?",
         "he ordered a cold drink at the bar .",
         "the drink tasted of lemon and mint .",
         "a hot drink helps when you have a cold .",
         "she spilled her drink on the carpet .",
         "this drink is too sweet for me ."],
        ["you should drink more juice in summer .",
         "we drink tea every afternoon at four .",
         "horses drink from the stream at dusk .",
         "i hardly ever drink coffee after lunch .",
         "at the wedding they drink to the health of the bride .",
         "you really should not drink that milk , it has gone sour ."]),
    "rock": (
        ["a huge rock blocked the mountain road .",
         "the children climbed onto the rock by the sea .",
         "she sat on a flat rock and ate her lunch .",
         "he threw a rock into the lake .",
         "the rock was covered in green moss .",
         "my brother listens to rock from the seventies ."],
        ["the waves rock the little boat .",
         "she began to rock the baby to sleep .",
         "at night the strong winds rock the old house .",
         "parents rock their babies in their arms .",
         "sit still and do not rock the canoe .",
         "a big scandal could rock the government ."]),
    "walk": (
        ["we went for a walk along the beach .",
         "the walk to school takes twenty minutes .",
         "after dinner they took a long walk .",
         "the dog loves his evening walk .",
         "it is a short walk from the station .",
         "a walk in the forest always calms me ."],
        ["i walk to work when the weather is nice .",
         "they walk their dog twice a day .",
         "after school the children walk home together .",
         "tomorrow morning we will walk along the coast .",
         "from the hotel you can walk there in ten minutes .",
         "by their first birthday babies can walk ."]),
    "cook": (
        ["the cook made soup for the whole army .",
         "my grandmother was a wonderful cook .",
         "the ship had a cook from portugal .",
         "a good cook never wastes food .",
         "the head cook shouted at the waiters .",
         "she worked as a cook in a busy hotel ."],
        ["i cook dinner for my family every evening .",
         "we will cook the sausages on the grill .",
         "my father likes to cook spicy food .",
         "they always cook everything in one big pot .",
         "for best results you should cook the rice slowly .",
         "can your little brother cook pasta without a recipe ?"]),
    "dance": (
        ["they met at a dance in the village hall .",
         "the first dance of the evening was a waltz .",
         "she learned a traditional dance from her mother .",
         "the dance lasted until midnight .",
         "may i have this dance ?",
         "the new dance became popular with teenagers ."],
        ["we dance in the kitchen while the pasta boils .",
         "they often dance at the club on fridays .",
         "i cannot dance , but i love music .",
         "at night the children dance around the fire .",
         "at parties you should dance with your grandmother .",
         "in the hive bees dance to show where the flowers are ."]),
    "call": (
        ["i got a call from my sister this morning .",
         "the phone call lasted an hour .",
         "she missed an important call during the meeting .",
         "the call of the owl woke me up .",
         "thank you for your call .",
         "a call came in just before midnight ."],
        ["please call me when you get home .",
         "we call our dog rex .",
         "you should call the doctor .",
         "later i will call a taxi for you .",
         "every sunday the students call their parents .",
         "did the old neighbours call the police ?"]),
    "visit": (
        ["the queen made a short visit to the hospital .",
         "our visit to rome was too short .",
         "thank you for your kind visit .",
         "the doctor charged us for the visit .",
         "a visit from my cousins always cheers me up .",
         "this was her first visit to africa ."],
        ["we visit our grandparents every summer .",
         "tourists visit the castle in august .",
         "while you are here you should visit the museum .",
         "next week my aunt will visit us .",
         "this time they did not visit the old town .",
         "can the whole class visit the farm tomorrow ?"]),
    "paint": (
        ["the paint on the door is still wet .",
         "we bought two tins of white paint .",
         "the old paint was peeling off the walls .",
         "there is paint on your sleeve .",
         "this paint dries in an hour .",
         "she mixed the paint with a little oil ."],
        ["we will paint the kitchen blue .",
         "children love to paint with their fingers .",
         "i paint landscapes in my free time .",
         "they paint the fence every year .",
         "can you paint a portrait of my dog ?",
         "each spring my uncle and aunt paint the boat ."]),
    "fish": (
        ["he caught a huge fish in the lake .",
         "the fish in this river are safe to eat .",
         "a small fish swam between the rocks .",
         "we had fish and chips by the harbour .",
         "every fish in the tank was bright orange .",
         "the fish tasted of lemon and garlic ."],
        ["we fish in the river every summer .",
         "old men fish from the pier all day .",
         "to fish here you need a licence .",
         "bears fish for salmon in the rapids .",
         "they only fish at dawn when the lake is calm .",
         "on saturday i will fish with my uncle ."]),
    "plant": (
        ["the plant on the windowsill needs more sun .",
         "she gave me a plant for my birthday .",
         "this plant grows only in the desert .",
         "a chemical plant was built near the river .",
         "the tomato plant produced fifty tomatoes .",
         "my favourite plant is the sunflower ."],
        ["we plant potatoes in early april .",
         "they will plant trees along the new road .",
         "you should plant the seeds in a sunny spot .",
         "farmers plant rice in flooded fields .",
         "i will plant roses in the front garden .",
         "did the new owners plant the bulbs last autumn ?"]),
    "dream": (
        ["i had a strange dream last night .",
         "her dream is to become a pilot .",
         "the dream felt so real that i woke up crying .",
         "he told us about his dream of a flying house .",
         "a bad dream kept him awake .",
         "it was a dream come true for the whole team ."],
        ["we dream of a house by the sea .",
         "children dream about flying .",
         "i often dream in french .",
         "the young players dream of winning the cup one day .",
         "it is fine to dream , but you must also work hard .",
         "many young artists in paris dream of a show in new york ."]),
    "smile": (
        ["her smile brightened the whole room .",
         "he greeted us with a warm smile .",
         "the baby gave a big smile .",
         "a smile costs nothing .",
         "the smile on his lips disappeared .",
         "she has a lovely smile ."],
        ["please smile for the camera .",
         "they smile when they see the puppy .",
         "i could not help but smile .",
         "the guards at the palace never smile .",
         "you should try to smile more often .",
         "we smile at strangers in this town ."]),
    "swim": (
        ["we went for a swim in the lake .",
         "a morning swim is the best way to start the day .",
         "after the swim we lay in the sun .",
         "the swim across the bay took two hours .",
         "she enjoys a quick swim before work .",
         "the long swim left him exhausted ."],
        ["we swim in the sea every morning .",
         "can you swim across the river ?",
         "the children learn to swim at school .",
         "the ducks swim on the pond behind the farm .",
         "i will swim fifty lengths tomorrow .",
         "the twins next door swim faster than anyone in the club ."]),
    "shop": (
        ["the shop on the corner sells fresh bread .",
         "she opened a small shop in the village .",
         "the shop closes at six .",
         "we found a lovely shop near the harbour .",
         "his father owns a flower shop .",
         "every shop in town was closed on monday ."],
        ["we shop at the market on saturdays .",
         "these days i prefer to shop online .",
         "they shop for clothes in the city .",
         "on friday let us shop for a present for grandma .",
         "people shop on their way home from work .",
         "at christmas you can shop here until midnight ."]),
    "film": (
        ["we watched a film about the war .",
         "the film won three awards .",
         "her new film opens next friday .",
         "the old film was in black and white .",
         "i fell asleep during the film .",
         "this film is based on a true story ."],
        ["they will film the final scene in spain .",
         "we film the birds from a hidden tent .",
         "you cannot film inside the museum .",
         "sometimes the crew had to film at night .",
         "i want to film the wedding for my sister .",
         "tourists film the parade with their phones ."]),
    "race": (
        ["she won the race by two seconds .",
         "the race starts at noon .",
         "the horse race drew a huge crowd .",
         "a boat race is held on the river every april .",
         "he trained for the race all winter .",
         "the space race began in the fifties ."],
        ["we race our bikes down the hill .",
         "the boys race each other to the gate .",
         "they will race in the final on sunday .",
         "you must not race on the public roads .",
         "i will race you to the end of the beach .",
         "on sunday the cars race around the track at great speed ."]),
    "water": (
        ["the water in the lake was freezing .",
         "can i have a glass of water ?",
         "she poured water into the vase .",
         "the water was too rough for small boats .",
         "clean water is scarce in the desert .",
         "we carried water up the hill in buckets ."],
        ["please water the plants while i am away .",
         "we water the garden every evening .",
         "you should water tomatoes in the morning .",
         "when it is very hot we water the lawn twice a day .",
         "they water the roses only at night .",
         "do not water the cactus too often ."]),
    "sign": (
        ["the sign said the road was closed .",
         "a sign above the door read welcome .",
         "we missed the sign for the motorway .",
         "a red sky is a sign of good weather .",
         "she made a sign with her hand .",
         "there was no sign of the missing cat ."],
        ["please sign the form at the bottom .",
         "guests sign the register at the entrance .",
         "both companies will sign the contract tomorrow .",
         "the leaders will sign the treaty in geneva .",
         "many famous authors sign books at the fair .",
         "the busy manager forgot to sign the letter ."]),
    "plan": (
        ["we need a plan for the weekend .",
         "the plan was to leave before sunrise .",
         "her plan worked perfectly .",
         "the city has a new plan for the harbour .",
         "a simple plan is often the best .",
         "he explained the plan to the team ."],
        ["we plan to visit spain in june .",
         "they plan every detail of the trip .",
         "you should plan your route before you leave .",
         "my sister and i will plan the party .",
         "good architects always plan years in advance .",
         "did your parents plan this surprise ?"]),
}

POS_WORDS = tuple(_POS_SENTENCES)
# Held out: the probe is tested on words it never saw in training (a mix of everyday
# words whose noun and verb are equally common).
POS_TEST_WORDS = ("book", "ring", "face", "drink", "cook", "paint", "dream", "water")


def pos_probe_examples(seed=None, by="word") -> Split:
    """NOUN/VERB examples of the 32 ambiguous words, split by word or by occurrence.

    by="word" (the default): train has 24 words, test the other 8 (96 examples), which
        the probe never saw. seed=None keeps the fixed `POS_TEST_WORDS` (288 / 96 examples),
        chosen so that no test word occurs anywhere in a training sentence; an int draws the
        8 test words with random.Random(seed), and a drawn word may then occur in another
        word's training sentence, as context, never as a probed word.
    by="occurrence": every word is in both: of its 6 NOUN and 6 VERB sentences, 2 of each
        (drawn with random.Random(seed), seed None meaning 0) go to test, 4 of each to
        train (256 / 128 examples). A probe can then also remember the words themselves,
        which is what a control task (Hewitt & Liang 2019) measures.
    Returns Split(train, test) of `PosExample`s, in the order of the table above; each word
    contributes 6 NOUN and 6 VERB examples in all.
    """
    if by not in ("word", "occurrence"):
        raise ValueError(f"by must be 'word' or 'occurrence', got {by!r}")
    rng = random.Random(0 if seed is None else seed)
    test_words = set(POS_TEST_WORDS if seed is None or by == "occurrence"
                     else rng.sample(POS_WORDS, len(POS_TEST_WORDS)))
    train, test = [], []
    for word, (nouns, verbs) in _POS_SENTENCES.items():
        for label, sentences in (("NOUN", nouns), ("VERB", verbs)):
            held = set(rng.sample(range(len(sentences)), 2)) if by == "occurrence" else set()
            for i, sentence in enumerate(sentences):
                words = sentence.split()
                example = PosExample(words, words.index(word), word, label)
                in_test = i in held if by == "occurrence" else word in test_words
                (test if in_test else train).append(example)
    return Split(train, test)


# ----------------------------------------------------------------------------
# Self-similarity: the same word in different contexts

# word: {sense: 4 sentences} for two senses, or {None: 8 sentences} for one.
_CONTEXT_SENTENCES = {
    "bank": {
        "river": ["we had a picnic on the bank of the river .",
                  "the boat was tied to a tree on the bank .",
                  "ducks nested on the grassy bank of the stream .",
                  "he sat on the muddy bank and watched the water ."],
        "money": ["she opened an account at the bank .",
                  "the bank lent them money for a new house .",
                  "i need to go to the bank before it closes .",
                  "the bank raised its interest rates again ."],
    },
    "bat": {
        "animal": ["a bat flew out of the cave at dusk .",
                   "the bat hung upside down from the roof of the barn .",
                   "each bat can eat thousands of insects in a night .",
                   "we saw a tiny bat sleeping in the attic ."],
        "sport": ["he swung the bat and hit the ball over the fence .",
                  "she bought a new cricket bat for the summer .",
                  "the wooden bat broke in two .",
                  "hold the bat with both hands ."],
    },
    "light": {
        "brightness": ["the light from the window woke me up .",
                       "we read by the light of a candle .",
                       "the light in the hall is broken .",
                       "a strange light appeared in the sky ."],
        "weight": ["this bag is light enough to carry all day .",
                   "she packed a light jacket for the trip .",
                   "the new bike is very light .",
                   "we had a light lunch in the garden ."],
    },
    "spring": {
        "season": ["the trees blossom in spring .",
                   "we hope to travel to japan next spring .",
                   "spring came early this year .",
                   "the garden is beautiful in late spring ."],
        "source": ["we filled our bottles at a spring in the hills .",
                   "the village gets its water from a spring .",
                   "a hot spring bubbles up near the lake .",
                   "the stream starts at a spring under the rocks ."],
    },
    "match": {
        "game": ["we watched the football match on tv .",
                 "she won the match in straight sets .",
                 "the match was cancelled because of rain .",
                 "thousands of fans came to the match ."],
        "stick": ["he lit the candle with a match .",
                  "a single match started the fire .",
                  "the match burned down to his fingers .",
                  "she struck a match in the dark ."],
    },
    "plant": {
        "organism": ["the plant on my desk needs more sunlight .",
                     "she watered the plant every morning .",
                     "this plant has bright red flowers .",
                     "a tomato plant grew by the back door ."],
        "factory": ["the car plant employs two thousand workers .",
                    "the power plant was closed last year .",
                    "the plant produces steel for ships .",
                    "workers at the chemical plant went on strike ."],
    },
    "bark": {
        "dog": ["the dog gave a loud bark .",
                "we heard a bark from the garden next door .",
                "his bark is worse than his bite .",
                "the puppy let out a tiny bark ."],
        "tree": ["the bark of the old oak was rough .",
                 "deer had eaten the bark off the young trees .",
                 "medicine can be made from the bark of this tree .",
                 "beetles live under the bark ."],
    },
    "doctor": {None: [
        "the doctor listened to my heart .",
        "my sister works as a doctor in a small town .",
        "we waited two hours to see the doctor .",
        "the doctor told him to rest for a week .",
        "a doctor arrived at the scene of the accident .",
        "she wants to become a doctor like her father .",
        "the young doctor worked through the night .",
        "call a doctor if the fever gets worse ."]},
    "coffee": {None: [
        "i drink a cup of coffee every morning .",
        "the coffee in this cafe is excellent .",
        "she spilled coffee on her new shirt .",
        "we talked for hours over coffee .",
        "the smell of coffee filled the kitchen .",
        "he grows coffee on a farm in brazil .",
        "this coffee is too strong for me .",
        "they stopped for coffee on the way home ."]},
    "window": {None: [
        "she opened the window to let in some air .",
        "a bird flew into the kitchen window .",
        "the window was covered in frost .",
        "he looked out of the window at the rain .",
        "someone broke the window of the bakery .",
        "we sat by the window on the train .",
        "the cat sleeps by the window in the afternoon .",
        "every window in the house faces south ."]},
    "guitar": {None: [
        "he plays the guitar in a jazz band .",
        "she bought an old guitar at the market .",
        "my guitar needs new strings .",
        "the guitar was a gift from his uncle .",
        "we sang around the fire while tom played guitar .",
        "i am learning to play the guitar .",
        "the sound of the guitar filled the room .",
        "a broken guitar hung on the wall of the cafe ."]},
    "elephant": {None: [
        "an elephant can drink two hundred litres of water a day .",
        "the elephant lifted the log with its trunk .",
        "we saw an elephant at the river in the evening .",
        "the baby elephant stayed close to its mother .",
        "an elephant never forgets , the saying goes .",
        "the old elephant led the herd to water .",
        "she took a photo of the elephant from the jeep .",
        "the elephant was bigger than our car ."]},
    "bread": {None: [
        "she bakes bread every saturday .",
        "the bread was still warm from the oven .",
        "we bought a loaf of bread at the market .",
        "he spread butter on the bread .",
        "this bread is made with rye flour .",
        "the smell of fresh bread filled the street .",
        "we fed the ducks with old bread .",
        "there is no bread left for breakfast ."]},
}

POLYSEMOUS = tuple(w for w, senses in _CONTEXT_SENTENCES.items() if None not in senses)
MONOSEMOUS = tuple(w for w, senses in _CONTEXT_SENTENCES.items() if None in senses)


def context_sentences() -> dict[str, list[ContextExample]]:
    """word -> its 8 `ContextExample`s, for the 13 words of `POLYSEMOUS` and `MONOSEMOUS`.

    A polysemous word has 4 sentences of each sense (first sense first), a monosemous
    one 8 sentences with sense None. The word occurs exactly once in each sentence.
    """
    table = {}
    for word, senses in _CONTEXT_SENTENCES.items():
        table[word] = []
        for sense, sentences in senses.items():
            for sentence in sentences:
                words = sentence.split()
                table[word].append(ContextExample(words, words.index(word), word, sense))
    return table


# ----------------------------------------------------------------------------
# Bigram shift


def probe_sentences() -> list[list[str]]:
    """Every distinct sentence of this module, as lists of words, in a fixed order (488).

    The part-of-speech sentences first (word by word, nouns before verbs), then the
    self-similarity ones. These are the sentences of `bigram_shift_examples`, unswapped.
    """
    sentences, seen = [], set()
    texts = [s for nouns, verbs in _POS_SENTENCES.values() for s in nouns + verbs]
    texts += [s for senses in _CONTEXT_SENTENCES.values() for group in senses.values() for s in group]
    for text in texts:
        if text not in seen:
            seen.add(text)
            sentences.append(text.split())
    return sentences


def _is_word(token):
    return any(c.isalnum() for c in token)  # "," "." "?" are not words


def _swappable(words):
    """Positions i where words i and i+1 may be swapped: not the first, no punctuation, not equal."""
    return [i for i in range(1, len(words) - 1)
            if _is_word(words[i]) and _is_word(words[i + 1]) and words[i] != words[i + 1]]


def swap_bigram(words, i):
    """A copy of `words` with words i and i+1 swapped: swap_bigram(["a", "b", "c"], 1) == ["a", "c", "b"]."""
    swapped = list(words)
    swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    return swapped


def bigram_shift_examples(seed=0, test_fraction=0.25) -> Split:
    """Bigram shift: which sentences had two adjacent words swapped?

    Shuffles `probe_sentences()` with `random.Random(seed)`, labels every second
    sentence of the shuffled order 1 and swaps, in each of those, one pair of adjacent
    words chosen at random among `_swappable` positions (never the first word, never
    punctuation). The first `1 - test_fraction` of the shuffled order is train, the rest
    test; both splits are balanced to within one example (183/183 and 61/61 by default).
    Each sentence appears once, swapped or not, never both.
    """
    rng = random.Random(seed)
    sentences = probe_sentences()
    rng.shuffle(sentences)
    examples = []
    for k, words in enumerate(sentences):
        if k % 2 == 1:
            i = rng.choice(_swappable(words))
            examples.append(ShiftExample(swap_bigram(words, i), 1, i, words))
        else:
            examples.append(ShiftExample(list(words), 0, None, words))
    n_train = round(len(examples) * (1 - test_fraction))
    n_train -= n_train % 2  # an even cut keeps both splits balanced
    return Split(examples[:n_train], examples[n_train:])


# ----------------------------------------------------------------------------
# Probes for the course's own tiny BERT (the review world of notebook 04)


def review_probe_examples(seed=0, fold=0, n_folds=3, n_train=400, n_test=200) -> dict[str, Split]:
    """Token-level probing tasks in the review world, for the tiny BERT's snapshots (notebook 07).

    Sentences follow three of the review grammar's own templates, chosen because in them
    the adjective is the only word that carries the sentiment:
        "the {noun} was {adj} ."   "the {noun} was {adverb} {adj} ."   "what a {adj} {noun} ."
    Returns {"word class": Split, "sentiment": Split} of `PosExample`s (words, index, word, label):
      word class: the noun (label "NOUN") and the adjective ("ADJ") of every sentence;
      sentiment:  the adjective, label "POSITIVE" or "NEGATIVE".
    Both are split by word type, n_folds ways: random.Random(seed) shuffles each topic's
    nouns and each sentiment's adjectives and cuts every list into n_folds parts; part
    `fold` is held out. The n_test test sentences use only held-out words, the n_train
    training sentences only the others, so a probe never sees a test word in training and
    cannot pass by remembering words. Over the n_folds folds every word is tested once.
    Each sentence draws its template, topic, noun, sentiment and adjective uniformly
    (from random.Random((seed, fold)) as a string seed).
    """
    from plmcourse.data.reviews import _ADVERBS, NEGATIVE, POSITIVE, TOPICS

    if not 0 <= fold < n_folds:
        raise ValueError(f"fold must be in 0..{n_folds - 1}, got {fold}")
    order = random.Random(seed)

    def held_part(words):
        words = list(words)
        order.shuffle(words)
        return set(words[fold::n_folds])  # every n_folds-th word of the shuffled list

    held_nouns = {t: held_part(nouns) for t, nouns in TOPICS.items()}
    held_adjectives = held_part(POSITIVE) | held_part(NEGATIVE)
    rng = random.Random(f"{seed}-{fold}")

    def sentences(n, held):
        word_class, sentiment = [], []
        for _ in range(n):
            topic = rng.choice(list(TOPICS))
            positive = rng.random() < 0.5
            noun = rng.choice([w for w in TOPICS[topic] if (w in held_nouns[topic]) == held])
            adj = rng.choice([w for w in (POSITIVE if positive else NEGATIVE) if (w in held_adjectives) == held])
            kind = rng.randrange(3)
            text = (f"the {noun} was {adj} ." if kind == 0 else
                    f"the {noun} was {rng.choice(_ADVERBS)} {adj} ." if kind == 1 else f"what a {adj} {noun} .")
            words = text.split()
            word_class += [PosExample(words, words.index(noun), noun, "NOUN"),
                           PosExample(words, words.index(adj), adj, "ADJ")]
            sentiment.append(PosExample(words, words.index(adj), adj, "POSITIVE" if positive else "NEGATIVE"))
        return word_class, sentiment

    (class_train, sent_train), (class_test, sent_test) = sentences(n_train, False), sentences(n_test, True)
    return {"word class": Split(class_train, class_test), "sentiment": Split(sent_train, sent_test)}
