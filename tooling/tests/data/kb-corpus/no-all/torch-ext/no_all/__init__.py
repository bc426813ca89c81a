def negate(x):
    return -x
