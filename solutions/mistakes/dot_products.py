"""Known mistakes of notebook 02 (dot products): wrong variants of ``solutions/dot_products.py``.

The checks run them on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
Each is one edit away from a correct answer; some call the reference itself (the
tests compile them as learner code calling the learner's own functions).
"""


def scores_keys_first(Q, K):
    return K @ Q.transpose(-2, -1)


def project_k_v_swapped(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_V.T, X @ W_K.T


def scaled_scores_no_sqrt(Q, K):
    return Q @ K.transpose(-2, -1)


def scaled_scores_by_d_k(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1]


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_why_scale_positive():
    return "b"


def answer_why_scale_sum_to_one():
    return "c"


def answer_why_scale_cheaper():
    return "d"


def answer_score_std_variance():
    return 64


def answer_score_std_scaled():
    return 1
