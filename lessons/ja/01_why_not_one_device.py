# %% [markdown]
# # 1. なぜ単一デバイスでは足りないのか
# 混合精度の Adam ではパラメータ 1 個あたり 16 バイト、活性値は L·B·s·d に比例して増え、チェックポイントは計算と引き換えにメモリを減らします。
#
# GPU 1 枚のメモリ量は決まっています (A100 や H100 なら 80 GiB)。ところがモデルの学習には、
# 重みそのものよりはるかに多くのメモリが要ります。このレッスンでは、その内訳を collsim の
# プランナー (`collsim.plan`) で数えます。プランナーは閉形式の計算機で、どんなモデルについても
# すぐに答えを返します。モデル状態の数え方は Rajbhandari et al. 2020 (ZeRO) に、活性値の
# 数え方は Korthikanti et al. 2022 に従います。
#
# **演習の進め方。** 演習にはそれぞれ専用の解答欄があります (たとえば
# `model_state_bytes_answer = None`)。`None` を自分の予想 (数値、`"64GiB"` のような単位付きの
# 文字列、指示があれば関数) に書き換えて、そのセルと直後のチェックのセルを実行してください。
# 正解かどうか、外れていればどうずれているのか (2 倍ずれている? 単位が違う?) が表示されます。
# `None` のままにしておくと、書き換えるべき解答欄のファイル名と行番号が表示されます。ここに
# 表示される数値はすべて、レッスンを実行したときに collsim が計算したもので、手で書き込んだ
# 数値は一つもありません。

# %%
from collsim import teach
from collsim.plan import plan
from collsim.units import format_size
from collsim.viz.memory import memory_figure

# %% [markdown]
# ## モデル状態: パラメータ 1 個あたり 16 バイト
#
# パラメータ数 $N$ のモデルを、混合精度 (bf16) と Adam という標準的な構成で学習するとします
# (Rajbhandari et al. 2020, ZeRO, 3.1 節)。GPU はパラメータ 1 個ごとに次のものを保持します。
#
# | 内容 | 精度 | バイト数 |
# |---|---|---|
# | 順伝播と逆伝播で使うパラメータ | bf16 | 2 |
# | その勾配 | bf16 | 2 |
# | fp32 のマスターコピー (bf16 では消えてしまう小さな更新も積み上げるため) | fp32 | 4 |
# | Adam の一次モーメント $m$ | fp32 | 4 |
# | Adam の二次モーメント $v$ | fp32 | 4 |
#
# $$M_\text{state} = (2 + 2 + 4 + 4 + 4)\,N = 16N \text{ bytes}$$
#
# 下の 3 行がオプティマイザ状態で、合わせて $12N$ です。これらは活性値を 1 つも保存しない
# うちから、学習が終わるまでずっとメモリに居座ります。
#
# **演習 1.1.** 混合精度 Adam の 7B メモリの例です。$N = 7 \times 10^9$ のとき、必要な
# モデル状態 (パラメータ + 勾配 + オプティマイザ状態) のバイト数を予想してください。

# %%
model_state_bytes_answer = None  # 予想を書く: 7B モデルのモデル状態のバイト数

# %%
report = plan(params="7B")  # パラメータ数だけを渡す: プランナーはモデル状態を数える
mem = report.memory
states = mem["params"] + mem["grads"] + mem["optimizer"]
n_params = report.derived["params"]
print(f"パラメータ (bf16)                       {format_size(mem['params']):>10}")
print(f"勾配 (bf16)                             {format_size(mem['grads']):>10}")
print(f"オプティマイザ状態 (fp32 コピー, m, v)  {format_size(mem['optimizer']):>10}")
print(f"モデル状態                              {format_size(states):>10} = {states:,} B")
print(f"= パラメータ 1 個あたり {states / n_params:g} バイト")
print(f"GPU 1 枚の容量は {format_size(mem['gpu_memory'])}: 収まる? {states <= mem['gpu_memory']}")
teach.check("1.1", model_state_bytes_answer, expected=states, rel=1e-3, unit="B")

# %% [markdown]
# 混合精度を使わない素の fp32 学習では、パラメータと勾配に 4 + 4 バイト、Adam の $m$ と $v$ に
# 8 バイトを使うので、やはりパラメータ 1 個あたり 16 バイトです。混合精度は演算を速くしますが、
# モデル状態を小さくするわけではありません。次のセルでプランナーに確かめます。

# %%
fp32 = plan(params="7B", precision="fp32").memory
fp32_states = fp32["params"] + fp32["grads"] + fp32["optimizer"]
print(f"fp32 の Adam: パラメータ 1 個あたり {fp32_states / n_params:g} バイト")

# %% [markdown]
# ## 活性値: L · B · s · d
#
# 逆伝播では勾配を計算するために順伝播の中間出力 (*活性値*) が必要なので、順伝播はそれを
# 保存しておきます。その大きさのオーダーは
#
# $$M_\text{act} \sim L \cdot B \cdot s \cdot d$$
#
# です。$L$ は層数、$B$ はマイクロバッチ、$s$ は系列長、$d$ は隠れ次元で、積になっているので
# どれか 1 つを 2 倍にするとメモリも 2 倍になります。Korthikanti et al. 2022 (Table 2) は、
# 活性値を 16 ビットで持つ GPT の 1 層について、アテンションヘッド数を $a$、隠れ次元を $h$
# (上の $d$) としてバイト数を正確に数えています。
#
# $$M_\text{layer} = s\,B\,h\left(34 + \frac{5\,a\,s}{h}\right) \text{ bytes}$$
#
# 34 は 1 層が保存するすべての活性値 (行列積の入力、層正規化、GELU、dropout のマスク) を
# まとめた係数です。$5as/h$ の項はアテンションスコアで、ヘッドごとに $s \times s$ の行列を
# 持つため $s^2$ に比例して増えます。(Flash Attention はスコアを保存しないのでこの項が消えますが、
# プランナーは論文と同じくこの項を残しています。)
#
# **演習 1.2.** このような層 $L$ 個分の活性値のバイト数を返す関数
# `activation_bytes(L, B, s, h, a)` を書いてください。チェックでは、いくつかのモデルについて
# プランナーの値と突き合わせます。

# %%
activation_bytes_answer = None  # 関数を書く: def activation_bytes(L, B, s, h, a): ...


# %%
def planner_activation_bytes(L, B, s, h, a):
    """プランナーが数える L 個の Transformer 層の活性値のバイト数 (マイクロバッチ 1 つ分)。"""
    memory = plan(layers=L, hidden=h, heads=a, seq=s, micro_batch=B, global_batch=B).memory
    return memory["activations_layers"]


cases = [(32, 1, 2048, 4096, 32), (24, 4, 1024, 2048, 16), (2, 8, 512, 768, 12), (96, 1, 2048, 12288, 96)]  # fmt: skip
teach.check_function("1.2", activation_bytes_answer, planner_activation_bytes, cases,
                     compare=lambda got, want: abs(got - want) <= 1e-9 * want, unit="B")  # fmt: skip

# %% [markdown]
# 次は具体的なモデルです。約 7B パラメータの GPT (32 層、隠れ次元 4096、32 ヘッド、系列長
# 2048 トークン) を、マイクロバッチ 1 で GPU 1 枚に載せます。プランナーは、層の外にある
# 埋め込みの dropout マスクと出力層のロジットも数えます。

# %%
shape = dict(layers=32, hidden=4096, heads=32, seq=2048)
one_gpu = plan(**shape, micro_batch=1, global_batch=1)
m1 = one_gpu.memory
print(f"パラメータ {one_gpu.derived['params'] / 1e9:.3g}B (形状から数えた値)")
print(f"1 層あたりの活性値   {format_size(m1['activations_per_layer'])}")
print(f"全層の活性値         {format_size(m1['activations_layers'])}")
print(f"活性値の合計         {format_size(m1['activations'])} (埋め込みとロジットを含む)")
print(f"モデル状態           {format_size(m1['params'] + m1['grads'] + m1['optimizer'])}")
print(f"合計                 {format_size(m1['total'])} / {format_size(m1['gpu_memory'])}")
for name, change in (("マイクロバッチ", dict(micro_batch=2, global_batch=2)),
                     ("層数", dict(layers=64))):  # fmt: skip
    m2 = plan(**{**shape, "micro_batch": 1, "global_batch": 1, **change}).memory
    print(
        f"2 倍にするもの: {name:<12} -> 全層の活性値 x{m2['activations_layers'] / m1['activations_layers']:.3g}"
    )

# %% [markdown]
# マイクロバッチや層数を 2 倍にすると、$L \cdot B \cdot s \cdot d$ のとおり活性値も 2 倍に
# なります。では系列長はどうでしょうか。
#
# **演習 1.3.** 上の式を使って、$s$ を 2048 から 4096 にしたとき ($h = 4096$, $a = 32$,
# $B = 1$)、1 層の活性値が何倍になるかを予想してください。チェックではプランナーの値と
# 比べます。

# %%
seq_growth_answer = None  # 予想を書く: M_layer(s=4096) / M_layer(s=2048)

# %%
short = plan(**shape, micro_batch=1, global_batch=1).memory["activations_per_layer"]
long = plan(**{**shape, "seq": 4096}, micro_batch=1, global_batch=1).memory["activations_per_layer"]
print(f"1 層あたりの活性値: {format_size(short)} (s = {shape['seq']})、"
      f"{format_size(long)} (s = {2 * shape['seq']})")  # fmt: skip
teach.check("1.3", seq_growth_answer, expected=long / short, rel=1e-3, unit="x")

# %% [markdown]
# 2 倍を超えます。トークン数が 2 倍になるうえに、トークンごとのアテンションスコアの項 $5as/h$
# も 2 倍になるので、この項は全体として $s^2$ に比例して増えるからです。
#
# ## チェックポイントは何と引き換えにメモリを減らすのか
#
# 活性値チェックポイント (全再計算) は各層の入力 $2sBh$ バイトだけを残して残りを捨て、
# 逆伝播のときにその層の順伝播をもう一度実行して取り戻します (Chen et al. 2016, "Training deep
# nets with sublinear memory cost")。メモリは大きく減る代わりに、計算は順伝播 1 回分増えます。
# トークン 1 個あたり順伝播は約 $2N$ FLOPs、逆伝播は $4N$ (Kaplan et al. 2020 のトークン 1 個
# あたり $6N$) で、再計算がさらに $2N$ を足します。
#
# **演習 1.4.** 全再計算で、学習 1 ステップの FLOPs は何倍になりますか。

# %%
recompute_flops_answer = None  # 予想を書く: 全再計算ありの FLOPs / なしの FLOPs

# %%
full = plan(**shape, micro_batch=1, global_batch=1, recompute="full")
mf = full.memory
print(f"1 層あたりの活性値: {format_size(m1['activations_per_layer'])} -> "
      f"{format_size(mf['activations_per_layer'])} "
      f"({m1['activations_per_layer'] / mf['activations_per_layer']:.3g} 分の 1)")  # fmt: skip
print(f"活性値の合計:       {format_size(m1['activations'])} -> {format_size(mf['activations'])}")
print(f"トークン 1 個・パラメータ 1 個あたりの FLOPs: {one_gpu.compute['flop_per_token_per_param']} -> "
      f"{full.compute['flop_per_token_per_param']}")  # fmt: skip
print(
    f"GPU 1 枚での合計: {format_size(mf['total'])} / {format_size(mf['gpu_memory'])}: 収まる? {mf['fits']}"
)
ratio = full.compute["flops_per_step"] / one_gpu.compute["flops_per_step"]
teach.check("1.4", recompute_flops_answer, expected=ratio, rel=1e-3, unit="x")

# %% [markdown]
# Hugging Face の Accelerate ND-parallel ガイド (2025) は、gradient checkpointing の実用上の
# 目安として「活性値メモリが 60-80 % 減り、学習時間が 20-30 % 増える」という数字を挙げて
# います。ここで数えた全再計算はその極端な側 (節約できるメモリも増える計算も最大) です。
# Megatron の *選択的* 再計算は、アテンションスコアだけを計算し直します (プランナーでは
# `recompute="selective"`)。
#
# 活性値をすべて再計算しても、この 7B モデルは GPU 1 枚に載りません。モデル状態の $16N$ だけで
# 多すぎるのです。この部分を減らすには **GPU 間で分割する** しかありません。図はその方法の
# 1 つである ZeRO (Rajbhandari et al. 2020) を示しています。8 GPU でデータ並列を行いながら、
# まずオプティマイザ状態をシャーディングし (ZeRO-1)、次に勾配も (ZeRO-2)、さらにパラメータも
# (ZeRO-3。PyTorch では FSDP と呼びます。レッスン 3 で実際に動かします) シャーディングします。
# いちばん左の棒は何もシャーディングしないときに各 GPU が持つ量で、上の単一 GPU の場合と
# 同じです。

# %%
fig = memory_figure(**shape, world_size=8, micro_batch=1, global_batch=8)
teach.show(fig, "01_memory_by_zero_stage")

# %% [markdown]
# シャーディングはモデル状態の 3 つの部分を分割しますが、活性値は分割しません。各 GPU は
# 相変わらず自分のマイクロバッチをすべての層に通すからです。全再計算も併用すると次のように
# なります。

# %%
fig = memory_figure(**shape, world_size=8, micro_batch=1, global_batch=8, recompute="full")
teach.show(fig, "01_memory_by_zero_stage_recompute")

# %% [markdown]
# ## まとめ
#
# - 混合精度の Adam は **パラメータ 1 個あたり 16 バイト** を保持します (bf16 のパラメータ
#   $2N$、勾配 $2N$、fp32 のマスターコピーと Adam のモーメントで $12N$。ZeRO 論文)。7B モデルの
#   モデル状態は、活性値を 1 つも保存しないうちから 80 GiB の GPU 1 枚を超えます。
# - 活性値は積 $L \cdot B \cdot s \cdot d$ で増えます。1 層あたり $sBh(34 + 5as/h)$ バイト
#   (Korthikanti et al. 2022) なので、長い系列ではアテンションスコアのぶん線形より速く
#   増えます。
# - 2 つの部分は対処法が違います。$16N$ は GPU 間で **分割** し (ZeRO、テンソル並列、
#   パイプライン並列)、活性値は **再計算** するかマイクロバッチを小さくして減らします。
#   全再計算は 1 層あたり $2sBh$ だけを残し、順伝播 1 回分の計算が増えます。トークン 1 個
#   あたり $6N$ ではなく $8N$ FLOPs です。
# - 次のレッスン 2 では *データ* を GPU 間で分割し、GPU どうしが何を通信しなければ
#   ならないかを見ます。
