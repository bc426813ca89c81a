__all__ = ["scale"]


def scale(x):
    return x.cuda() * 3
