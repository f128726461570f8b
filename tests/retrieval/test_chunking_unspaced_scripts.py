"""Text in a language written without spaces between words (Chinese, Japanese, Thai) is cut into passages the
embedding model reads whole, as English text is, and without spaces put into it.

Passages were measured in white-space separated words, and such a paragraph is one "word" however long: a whole
article became one passage, of which the model embeds its first 256 tokens, so nothing after them was found.
"""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from agent_handshake.models import Passage
from agent_handshake.retrieval.chunking import Chunk, split_markdown
from agent_handshake.retrieval.minilm import _default_model_dir
from tests.testapp.models import Article

pytestmark = pytest.mark.django_db

TEAS = ("龙井", "碧螺春", "铁观音", "大红袍", "普洱", "白毫银针", "祁门红茶", "黄山毛峰", "六安瓜片", "君山银针")

#: Forty sentences of Chinese, one paragraph (about 1,100 characters); each names its own tea garden and month.
CHINESE = "".join(f"第{n}号茶园的{TEAS[n % 10]}在{n % 12 + 1}月采摘，用{70 + n % 20}度的水冲泡。" for n in range(40))
JAPANESE = "".join(f"第{n}番の茶畑では{n % 12 + 1}月に新芽を摘み、{70 + n % 20}度のお湯で淹れます。" for n in range(40))
THAI = "".join(f"ไร่ชาหมายเลข{n}เก็บใบชาในเดือนที่{n % 12 + 1}และชงด้วยน้ำ{70 + n % 20}องศา" for n in range(40))


@pytest.fixture(scope="module")
def tokens():
    """How many tokens the default embedding model (all-MiniLM-L6-v2) reads a text as, [CLS] and [SEP] included."""
    tokenizer = Tokenizer.from_file(str(_default_model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text).ids)


@pytest.mark.parametrize("text", [CHINESE, JAPANESE, THAI], ids=["chinese", "japanese", "thai"])
def test_a_long_paragraph_without_spaces_is_cut_into_passages_the_model_reads_whole(publish, tokens, text):
    article = publish(Article, title="茶园", slug="tea-gardens", body=f"## 采摘\n\n{text}")
    passages = list(Passage.objects.filter(document__object_id=str(article.pk)).order_by("position"))
    assert len(passages) > 1
    for passage in passages:
        # What is embedded: the title, the heading and the text (retrieval.index._embedding_text).
        assert tokens("\n".join((passage.title, passage.heading, passage.text))) <= 256, passage.text
        assert " " not in passage.text  # cut from the text, nothing put into it
        assert passage.text in text
    # Every part of the text is in a passage, its end too.
    assert "".join(passage.text for passage in passages).endswith(text[-40:])
    covered = set()
    for passage in passages:
        start = text.index(passage.text)
        covered.update(range(start, start + len(passage.text)))
    assert covered == set(range(len(text)))


def test_chinese_sentences_are_whole_passages_and_their_neighbours_overlap():
    text = "绿茶用八十度的水。红茶用沸水冲泡三分钟。乌龙茶可以冲泡多次！普洱茶越陈越香？"
    assert split_markdown(text, max_words=20, overlap_words=11) == [
        Chunk(0, "", "绿茶用八十度的水。红茶用沸水冲泡三分钟。"),
        Chunk(1, "", "红茶用沸水冲泡三分钟。乌龙茶可以冲泡多次！"),
        Chunk(2, "", "乌龙茶可以冲泡多次！普洱茶越陈越香？"),
    ]
    # Words in a script with spaces keep theirs, however the text is cut: "Gaiwan" is one word, 盖 and 碗 two.
    assert split_markdown("用 Gaiwan 盖碗泡茶。", max_words=20) == [Chunk(0, "", "用 Gaiwan 盖碗泡茶。")]
    chunks = split_markdown("用 Gaiwan 盖碗泡茶，水温九十度。", max_words=4, overlap_words=0)
    assert [chunk.text for chunk in chunks] == ["用 Gaiwan 盖碗", "泡茶，水", "温九十度", "。"]
