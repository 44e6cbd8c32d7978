"""Pharaoh I/O and the alignment scores, on hand-made cases."""

import pytest

from rnnsearch.alignment import (aer, argmax_links, content_word_accuracy, format_pharaoh, parse_pharaoh,
                                 threshold_links)


def test_pharaoh_round_trip_and_errors():
    sure, possible = parse_pharaoh("0-0 1-2-P 2-1")
    assert sure == {(0, 0), (2, 1)} and possible == {(0, 0), (1, 2), (2, 1)}
    assert format_pharaoh(sure, possible) == "0-0 1-2-P 2-1"
    with pytest.raises(ValueError, match="bad link '1-x'"):
        parse_pharaoh("0-0 1-x", "gold.txt:3")


def test_aer_on_hand_made_cases():
    sure = [{(0, 0), (1, 1)}]
    possible = [{(0, 0), (1, 1), (2, 1)}]
    perfect = aer([{(0, 0), (1, 1)}], sure, possible)
    assert perfect["aer"] == 0.0 and perfect["precision"] == 1.0 and perfect["recall"] == 1.0
    # a possible link costs nothing in precision; a wrong one does
    assert aer([{(0, 0), (1, 1), (2, 1)}], sure, possible)["aer"] == 0.0
    wrong = aer([{(0, 0), (0, 1)}], sure, possible)
    # |A∩S| = 1, |A∩P| = 1, |A| = 2, |S| = 2 -> 1 - 2/4
    assert wrong["aer"] == pytest.approx(0.5)
    assert wrong["precision"] == 0.5 and wrong["recall"] == 0.5
    assert aer([set()], sure, possible)["aer"] == 1.0


def test_links_from_attention_and_content_accuracy():
    weights = [[0.7, 0.2, 0.1], [0.1, 0.5, 0.4], [0.05, 0.15, 0.8]]  # rows: target words
    assert argmax_links(weights) == {(0, 0), (1, 1), (2, 2)}
    assert threshold_links(weights, 0.3) == {(0, 0), (1, 1), (2, 1), (2, 2)}
    sure = [{(0, 0), (2, 1), (2, 2)}]
    roles = [["content", "content", "punct"]]
    # word 0 attends to its gold source (hit), word 1 does not (gold 2, argmax 1), word 2 is punctuation
    assert content_word_accuracy([weights], sure, roles) == 0.5
