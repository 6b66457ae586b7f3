"""Every sentence :mod:`collsim.teach` prints, in English and in Japanese.

One dictionary per language with the same keys and the same ``{placeholders}`` (a test
holds them equal); numbers arrive already formatted, so units and digits are the same in
both.  The Japanese terms follow ``lessons/ja/GLOSSARY.md``.

Examples
--------
>>> message("correct", "en", exercise="4.1", detail="1,024 B (1 KiB)")
'Correct! 4.1: 1,024 B (1 KiB)'
>>> message("correct", "ja", exercise="4.1", detail="1,024 B (1 KiB)")
'正解です！ 4.1: 1,024 B (1 KiB)'
"""

from ..viz.words import JA as FIGURE_JA

__all__ = ["CATALOG", "EN", "JA", "message"]

# The figures' words (collsim.viz.words: titles, axes, legends), keyed by their English text,
# join this catalog: the lessons and `collsim viz --lang ja` name each thing alike, and the
# tests that hold the two languages' keys and placeholders equal hold them too.
FIGURE_EN = {text: text for text in FIGURE_JA}

EN = {
    # ---- the verdicts and the prompts (teach/__init__.py) ----
    "correct": "Correct! {exercise}: {detail}",
    "not_yet": "Not yet. {exercise}: {message}",
    "replace_none": "Exercise {exercise}: replace None with {what}, then run this cell again.",
    "edit_slot": "Exercise {exercise}: {where}, then run this cell again.",
    "where_cell": "in the cell above, set {name} = ... {hint}",
    "where_file": "{path}:{line}: set {name} = ... {hint}",
    "the_answer": "the answer",
    "your_answer": "your answer",
    "what_number": "your number ({unit})",
    "what_array": "your array",
    "what_function": "your function",
    "what_rank": "a rank number, 0 to {last}",
    "said": "you said {said}: {how}",
    "answer_is": "The answer is {want}.",
    "hint": "Hint: {hint}",
    "answer_hidden": "(Wrong tries: {wrong}; the answer shows after {after}, or now with "
    "`collsim lesson N --reveal` or COLLSIM_REVEAL=1.)",
    "edit_again": "To change it: {where}.",
    "not_a_function": "your answer {answer} is not a function: write def f({parameters}): ... "
    "and set the slot to f",
    "cannot_run": "your answer could not be set up to run: {error}: {text}",
    "all_elements_agree": "all {count} elements agree",
    "all_cases_agree": "all {count} cases agree with the reference",
    "case_raised": "case {case} ({args}) raised {error}: {text}",
    "case_differs": "case {case} ({args}): {how}",
    "rank_is": "rank {rank}: {why}",
    "named_rank": "you named rank {rank}",
    "named_rank_state": "you named rank {rank}, but {state}",
    "rank_wrong": "{said}. The answer is rank {rank}: {why}.",
    "picture_saved": "[picture saved: {path}]",
    "no_slot": "exercise {exercise}: cannot tell which answer slot it checks",
    "no_solutions_file": "no solutions file {path} for exercise {exercise}",
    "no_solution_value": "{file} defines no {name} (exercise {exercise})",
    # ---- numbers and units (feedback.py) ----
    "unit_bytes": "bytes",
    "unit_seconds": "seconds",
    "unit_rate": "bytes per second",
    "unit_ratio": "a ratio",
    "unit_fraction": "a fraction between 0 and 1",
    "unit_number": "a number",
    "unit_other": "a number, in {unit}",
    "cannot_read": "your answer {answer} cannot be read: {error}",
    "not_a_number": "your answer {answer} is not a number ({unit} expected)",
    "not_finite": "your answer {answer} is not a finite number",
    "factor_sentence": "{what}. {question}",
    "sign_what": "the answer with the wrong sign",
    "sign_question": "Check the sign.",
    "twice_what": "2x the answer",
    "twice_question": "Did you count something twice (both phases, both directions, send and "
    "receive)?",
    "half_what": "half the answer",
    "half_question": "Did you count only one of two equal parts (one phase, one direction)?",
    "k_what": "K = {k} times the answer",
    "k_question": "Did you add up all K ranks where one rank's share was asked?",
    "one_over_k_what": "1/K of the answer (K = {k})",
    "one_over_k_question": "Did you count one chunk (1/K) where the whole buffer was asked?",
    "k_minus_1_what": "K-1 = {k_minus_1} times the answer",
    "k_minus_1_question": "Did you count every other rank's buffer where one was asked?",
    "one_over_k_minus_1_what": "1/(K-1) of the answer (K = {k})",
    "one_over_k_minus_1_question": "Did you count one of the K-1 other ranks where all of them "
    "were asked?",
    "k_minus_1_over_k_what": "(K-1)/K = {k_minus_1}/{k} of the answer",
    "k_minus_1_over_k_question": "Did you apply a factor (K-1)/K that does not belong here?",
    "k_over_k_minus_1_what": "K/(K-1) = {k}/{k_minus_1} times the answer",
    "k_over_k_minus_1_question": "Did you leave out a factor (K-1)/K (K-1 of the K chunks)?",
    "ring_what": "2(K-1)/K = {two_k_minus_2}/{k} times the answer",
    "ring_question": "Did you apply the ring all-reduce factor 2(K-1)/K where it does not belong?",
    "one_over_ring_what": "K/(2(K-1)) = {k}/{two_k_minus_2} of the answer",
    "one_over_ring_question": "Did you leave out the factor 2(K-1)/K: 2(K-1) steps of one chunk "
    "N/K each?",
    "eight_what": "8x the answer",
    "eighth_what": "1/8 of the answer",
    "bits_question": "Bits or bytes? A byte is 8 bits.",
    "times_what": "{factor}x the answer",
    "fraction_what": "1/{factor} of the answer",
    "prefix_question": "Check the unit prefix ({prefix}).",
    "binary_times_what": "(1024/1000)^{n} times the answer",
    "binary_fraction_what": "(1000/1024)^{n} of the answer",
    "binary_question": "Decimal or binary units? 1 {binary} = {binary_bytes} B, 1 {decimal} = "
    "{decimal_bytes} B.",
    "answer_is_zero": "the answer is zero.",
    "reciprocal": "the reciprocal of the answer. Did you divide the wrong way round?",
    # ---- the exercise's own quantities (diagnosis.py) ----
    "and": " and ",
    "or": " or ",
    "quantity_named": "{symbol} = {value} {meaning}",
    "q_times_what": "exactly {names} times the answer",
    "q_times_question": "Did you multiply by {symbols} where it does not belong?",
    "q_over_what": "exactly 1/{inverse} of the answer ({names})",
    "q_over_question": "Did you count only one of the {meanings}, or leave out a factor {symbols}?",
    "q_plus_what": "exactly {names} too many",
    "q_plus_question": "Did you add {symbols} where it does not belong?",
    "q_minus_what": "exactly {names} too few",
    "q_minus_question": "Did you leave {symbols} out (a term of the sum, or a % {symbols})?",
    "off_by_one_more": "exactly one too many: off by one. Did you count both ends, or count from 1 "
    "where the lesson counts from 0?",
    "off_by_one_less": "exactly one too few: off by one. Did you leave out one end, or count from "
    "0 where the lesson counts from 1?",
    "percent_question": "A percentage where a fraction is asked? Write 0.25 for 25 %.",
    "alternative": "that is {name}. {why}",
    "meaning_latency": "of latency",
    "meaning_wire": "on the wire",
    "decimal_megabyte": "1 MB = 10^6 B in place of 1 MiB",
    "decimal_megabyte_why": "1 MiB is 2^20 = 1,048,576 bytes.",
    "product_sentence": "exactly the answer x {first} x {second}: two slips at once? Check each "
    "factor.",
    "too_many": "{gap} too many.",
    "too_few": "{gap} too few.",
    "too_high": "{percent} % too high.",
    "too_low": "{percent} % too low.",
    # ---- arrays, lists and ranks (feedback.py) ----
    "item": "item",
    "got_kind_expected_list": "got {kind} {got}, expected a list of {count}",
    "got_items": "got {got} items, expected {want}",
    "got_expected": "got {got}, expected {want}",
    "got_expected_how": "got {got}, expected {want}: {how}",
    "got_how": "got {got}: {how}",
    "got_only": "got {got}, which is not it",
    "element_got": "[{index}] got {got}",
    "elements_differ_hidden": "{count} of {size} elements differ; {first}",
    "shape": "shape {got}, expected {want}{hint}",
    "shape_hint": " (same number of elements: transposed or reshaped?)",
    "element": "[{index}] got {got}, expected {want}",
    "elements_differ": "{count} of {size} elements differ; {first}; max |difference| {gap}",
    "every_element": "; every element is {how}",
    "not_a_rank": "your answer {answer} is not a rank: give a number 0 to {last}",
    "no_such_rank": "rank {answer} does not exist: the ranks are 0 to {last}",
    **FIGURE_EN,
}

JA = {
    "correct": "正解です！ {exercise}: {detail}",
    "not_yet": "まだ正解ではありません。{exercise}: {message}",
    "replace_none": "演習 {exercise}: None を「{what}」に置き換えてから、このセルをもう一度実行して"
    "ください。",
    "edit_slot": "演習 {exercise}: {where}。そのあと、このセルをもう一度実行してください。",
    "where_cell": "上のセルで {name} = ... と書き換えます {hint}",
    "where_file": "{path}:{line}: {name} = ... と書き換えます {hint}",
    "the_answer": "答え",
    "your_answer": "あなたの答え",
    "what_number": "あなたの答え ({unit})",
    "what_array": "あなたの配列",
    "what_function": "あなたの関数",
    "what_rank": "ランク番号 (0 から {last})",
    "said": "あなたの答えは {said} です: {how}",
    "answer_is": "正解は {want} です。",
    "hint": "ヒント: {hint}",
    "answer_hidden": "(間違えた回数: {wrong}。正解は {after} 回間違えると表示されます。"
    "すぐに見るには `collsim lesson N --reveal` か COLLSIM_REVEAL=1 を使います)",
    "edit_again": "直すには: {where}。",
    "not_a_function": "あなたの答え {answer} は関数ではありません: def f({parameters}): ... "
    "と書いて、解答欄に f を入れてください",
    "cannot_run": "あなたの答えを実行できる形にできませんでした: {error}: {text}",
    "all_elements_agree": "{count} 個の要素がすべて一致しています",
    "all_cases_agree": "{count} 個のケースすべてで参照実装と一致しています",
    "case_raised": "ケース {case} ({args}) で {error} が発生しました: {text}",
    "case_differs": "ケース {case} ({args}): {how}",
    "rank_is": "ランク {rank}: {why}",
    "named_rank": "あなたが挙げたのはランク {rank} です",
    "named_rank_state": "あなたが挙げたのはランク {rank} ですが、{state}",
    "rank_wrong": "{said}。正解はランク {rank} です: {why}。",
    "picture_saved": "[図を保存しました: {path}]",
    "no_slot": "演習 {exercise}: どの解答欄を確かめるのか判別できません",
    "no_solutions_file": "演習 {exercise} の解答ファイル {path} がありません",
    "no_solution_value": "{file} に {name} が定義されていません (演習 {exercise})",
    "unit_bytes": "バイト数",
    "unit_seconds": "秒数",
    "unit_rate": "バイト毎秒",
    "unit_ratio": "比",
    "unit_fraction": "0 から 1 までの割合",
    "unit_number": "数値",
    "unit_other": "{unit} 単位の数値",
    "cannot_read": "あなたの答え {answer} は読み取れません: {error}",
    "not_a_number": "あなたの答え {answer} は数値ではありません ({unit}を答えてください)",
    "not_finite": "あなたの答え {answer} は有限の数ではありません",
    "factor_sentence": "{what}。{question}",
    "sign_what": "答えと符号が逆です",
    "sign_question": "符号を確かめてください。",
    "twice_what": "答えの 2 倍です",
    "twice_question": "何かを二重に数えていませんか (2 つのフェーズ、両方向、送信と受信の"
    "両方など)?",
    "half_what": "答えの半分です",
    "half_question": "等しい 2 つの部分の片方 (1 つのフェーズ、一方向) だけを数えていませんか?",
    "k_what": "答えの K = {k} 倍です",
    "k_question": "1 ランク分を問われているのに、K ランクすべてを足し合わせていませんか?",
    "one_over_k_what": "答えの 1/K です (K = {k})",
    "one_over_k_question": "バッファ全体を問われているのに、1 チャンク (1/K) だけを数えて"
    "いませんか?",
    "k_minus_1_what": "答えの K-1 = {k_minus_1} 倍です",
    "k_minus_1_question": "1 ランク分を問われているのに、ほかのランクすべてのバッファを数えて"
    "いませんか?",
    "one_over_k_minus_1_what": "答えの 1/(K-1) です (K = {k})",
    "one_over_k_minus_1_question": "ほかの K-1 ランクすべてを問われているのに、そのうち 1 つ"
    "だけを数えていませんか?",
    "k_minus_1_over_k_what": "答えの (K-1)/K = {k_minus_1}/{k} です",
    "k_minus_1_over_k_question": "ここには当てはまらない係数 (K-1)/K を掛けていませんか?",
    "k_over_k_minus_1_what": "答えの K/(K-1) = {k}/{k_minus_1} 倍です",
    "k_over_k_minus_1_question": "係数 (K-1)/K (K 個のチャンクのうち K-1 個) を掛け忘れて"
    "いませんか?",
    "ring_what": "答えの 2(K-1)/K = {two_k_minus_2}/{k} 倍です",
    "ring_question": "リング all-reduce の係数 2(K-1)/K を、当てはまらないところで掛けて"
    "いませんか?",
    "one_over_ring_what": "答えの K/(2(K-1)) = {k}/{two_k_minus_2} です",
    "one_over_ring_question": "係数 2(K-1)/K を掛け忘れていませんか: 大きさ N/K のチャンクを"
    " 1 つずつ送るステップが 2(K-1) 回あります。",
    "eight_what": "答えの 8 倍です",
    "eighth_what": "答えの 1/8 です",
    "bits_question": "ビットとバイトを取り違えていませんか? 1 バイトは 8 ビットです。",
    "times_what": "答えの {factor} 倍です",
    "fraction_what": "答えの 1/{factor} です",
    "prefix_question": "単位の接頭辞 ({prefix}) を確かめてください。",
    "binary_times_what": "答えの (1024/1000)^{n} 倍です",
    "binary_fraction_what": "答えの (1000/1024)^{n} です",
    "binary_question": "10 進の単位と 2 進の単位を取り違えていませんか? 1 {binary} = "
    "{binary_bytes} B、1 {decimal} = {decimal_bytes} B です。",
    "answer_is_zero": "答えはゼロです。",
    "reciprocal": "答えの逆数です。割り算を逆にしていませんか?",
    "and": " と ",
    "or": " または ",
    "quantity_named": "{meaning}の {symbol} = {value}",
    "q_times_what": "ちょうど答えの {names} 倍です",
    "q_times_question": "掛けるべきでないところで {symbols} を掛けていませんか?",
    "q_over_what": "ちょうど答えの 1/{inverse} です ({names})",
    "q_over_question": "{meanings} のうち 1 つだけを数えていませんか? それとも係数 {symbols} を"
    "掛け忘れていませんか?",
    "q_plus_what": "ちょうど {names} だけ多すぎます",
    "q_plus_question": "足すべきでないところで {symbols} を足していませんか?",
    "q_minus_what": "ちょうど {names} だけ少なすぎます",
    "q_minus_question": "{symbols} を入れ忘れていませんか (和の項、または % {symbols})?",
    "off_by_one_more": "ちょうど 1 多すぎます (1 ずれ)。両端を数えていませんか? それとも、"
    "レッスンが 0 から数えるところを 1 から数えていませんか?",
    "off_by_one_less": "ちょうど 1 少なすぎます (1 ずれ)。片端を数え忘れていませんか? それとも、"
    "レッスンが 1 から数えるところを 0 から数えていませんか?",
    "percent_question": "割合を問われているのにパーセントで答えていませんか? 25 % なら 0.25 と"
    "書きます。",
    "alternative": "それは {name} です。{why}",
    "meaning_latency": "レイテンシ",
    "meaning_wire": "転送時間",
    "decimal_megabyte": "1 MiB のかわりに 1 MB = 10^6 B を使った値",
    "decimal_megabyte_why": "1 MiB は 2^20 = 1,048,576 バイトです。",
    "product_sentence": "ちょうど答え x {first} x {second} です: 2 つの間違いが重なっていませんか? "
    "それぞれの係数を確かめてください。",
    "too_many": "{gap} 多すぎます。",
    "too_few": "{gap} 少なすぎます。",
    "too_high": "{percent} % 大きすぎます。",
    "too_low": "{percent} % 小さすぎます。",
    "item": "要素",
    "got_kind_expected_list": "{kind} {got} が返りましたが、期待されるのは {count} 個の要素の"
    "リストです",
    "got_items": "要素が {got} 個返りましたが、期待されるのは {want} 個です",
    "got_expected": "{got} が返りましたが、期待値は {want} です",
    "got_expected_how": "{got} が返りましたが、期待値は {want} です: {how}",
    "got_how": "{got} が返りました: {how}",
    "got_only": "{got} が返りましたが、正しくありません",
    "element_got": "[{index}] は {got}",
    "elements_differ_hidden": "{size} 個中 {count} 個の要素が異なります; {first}",
    "shape": "形状が {got} ですが、期待される形状は {want} です{hint}",
    "shape_hint": " (要素数は同じです: 転置や reshape をしていませんか?)",
    "element": "[{index}] は {got}、期待値は {want}",
    "elements_differ": "{size} 個中 {count} 個の要素が異なります; {first}; 差の絶対値の最大 {gap}",
    "every_element": "; どの要素も同じ比です: {how}",
    "not_a_rank": "あなたの答え {answer} はランクではありません: 0 から {last} の数を答えて"
    "ください",
    "no_such_rank": "ランク {answer} は存在しません: ランクは 0 から {last} です",
    **FIGURE_JA,
}

CATALOG = {"en": EN, "ja": JA}


def message(key, lang="en", **fields):
    """The sentence ``key`` in ``lang`` ("en" or "ja") with ``fields`` filled in."""
    return CATALOG.get(lang, EN)[key].format(**fields)
