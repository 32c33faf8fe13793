"""The layers of src/ (src/LAYERS) hold: every #include under src/ reaches only its own layer or
one below it, a circle of files stays inside one folder that has a private header, every folder
of src/ is a listed layer, and docs/development.md describes the layers in their order.

Run with the repository's root as the first argument (ctest does), or from it. Each breach is one
line naming the file, the include and the layers; the exit status is 1 when there is any."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
SRC = os.path.join(ROOT, "src")
INCLUDE = os.path.join(ROOT, "include")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layers():
    """The layers, lowest first, as src/LAYERS lists them."""
    out = []
    with open(os.path.join(SRC, "LAYERS")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                out.append(line.split()[0])
    return out


def sources():
    for d, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                yield os.path.join(d, name)


def rel(path):
    return os.path.relpath(path, ROOT)


def layer_of(path):
    """The layer of a file under src/: its first folder."""
    return os.path.relpath(path, SRC).split(os.sep)[0]


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return INCLUDE_RE.findall(f.read())


def owners(files):
    """Public header vlmload/NAME.h -> the source files that implement it: src/**/NAME.c, else the
    files of a folder src/**/NAME/, else the files that include it first after their private
    header (a module's own header comes first: monitorspec.h is src/memory/monitor/spec.c's)."""
    own = {}
    for path in files:
        base = os.path.splitext(os.path.basename(path))[0]
        folder = os.path.dirname(path)
        # A file of a module's folder (one with a private internal.h) is that module's part.
        if (path.endswith(".c") and layer_of(path) != "mock" and
                not os.path.exists(os.path.join(folder, "internal.h"))):
            own.setdefault("vlmload/%s.h" % base, []).append(path)
    for d, dirs, _ in os.walk(SRC):
        for name in dirs:
            key = "vlmload/%s.h" % name
            folder = os.path.join(d, name)
            if key not in own:
                own[key] = [p for p in files if p.startswith(folder + os.sep)]
    for path in files:
        if not path.endswith(".c") or layer_of(path) == "mock":
            continue
        inc = [i for i in includes(path) if i != "internal.h" and not i.endswith("_internal.h")]
        if inc and inc[0].startswith("vlmload/") and inc[0] not in own:
            own[inc[0]] = [path]
    return own


def target(path, inc, own):
    """The files an include of path stands for, and their layer; (None, None) for a header that
    no source under src/ implements (a header of types alone is judged by its own includes)."""
    if inc.startswith("vlmload/"):
        files = own.get(inc)
        if not files:
            return None, None
        return files, layer_of(files[0])
    full = os.path.normpath(os.path.join(os.path.dirname(path), inc))
    if full.startswith(SRC + os.sep):
        return [full], layer_of(full)
    return None, None


def header_layer_breaches(order, own):
    """A public header may include only the headers of its own layer or below."""
    out = []
    rank = {l: i for i, l in enumerate(order)}
    for name in sorted(os.listdir(os.path.join(INCLUDE, "vlmload"))):
        key = "vlmload/" + name
        files = own.get(key)
        if not files:
            continue
        mine = layer_of(files[0])
        for inc in includes(os.path.join(INCLUDE, key)):
            _, layer = target(os.path.join(INCLUDE, key), inc, own)
            if layer and rank.get(layer, -1) > rank.get(mine, -1):
                out.append("include/%s (layer %s) includes %s (layer %s): a layer may not reach "
                           "up" % (key, mine, inc, layer))
    return out


def circles(edges):
    """Strongly connected components of more than one node (Tarjan's, iterative enough for a few
    hundred files)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def check():
    order = layers()
    rank = {l: i for i, l in enumerate(order)}
    files = list(sources())
    own = owners(files)
    breaches = []
    for d in sorted(os.listdir(SRC)):
        if os.path.isdir(os.path.join(SRC, d)) and d not in rank:
            breaches.append("src/%s/ is no layer: list it in src/LAYERS, or move its files into "
                            "one" % d)
    for path in files:
        if os.path.dirname(path) == SRC:
            breaches.append("%s stands outside every layer: move it into the folder of its "
                            "layer" % rel(path))
    edges = {}
    for path in files:
        mine = layer_of(path)
        if mine not in rank:
            continue
        for inc in includes(path):
            targets, layer = target(path, inc, own)
            if not layer:
                continue
            if layer not in rank:
                breaches.append("%s includes %s, which is in no layer" % (rel(path), inc))
            elif rank[layer] > rank[mine]:
                breaches.append("%s (layer %s) includes %s (layer %s): a layer may not reach up"
                                % (rel(path), mine, inc, layer))
            elif not inc.startswith("vlmload/") and layer != mine:
                breaches.append("%s (layer %s) includes %s, a private header of layer %s: what "
                                "other layers use belongs in include/vlmload/" % (rel(path), mine,
                                                                                   inc, layer))
            if path.endswith(".c") and inc.startswith("vlmload/"):
                for t in targets:
                    if t != path and t.endswith(".c"):
                        edges.setdefault(path, set()).add(t)
    breaches += header_layer_breaches(order, own)
    for comp in circles(edges):
        folders = {os.path.dirname(p) for p in comp}
        folder = folders.pop() if len(folders) == 1 else None
        private = folder and any(n == "internal.h" or n.endswith("_internal.h")
                                 for n in os.listdir(folder))
        if not private:
            breaches.append("a circle of files across folders, or in a folder of several concerns "
                            "(no private header says they are one): %s"
                            % ", ".join(rel(p) for p in comp))
    breaches += docs_breaches(order)
    return breaches


def docs_breaches(order):
    """docs/development.md's layout table names each layer's folder, in the order of LAYERS."""
    with open(os.path.join(ROOT, "docs", "development.md")) as f:
        text = f.read()
    found = [m.group(1) for m in re.finditer(r"^\| \*\*`src/([a-z]+)/`\*\*", text, re.M)]
    if found != order:
        return ["docs/development.md lists the layers %s; src/LAYERS has %s: describe each "
                "folder, one line each, in that order" % (found, order)]
    return []


def main():
    breaches = check()
    for b in breaches:
        print(b)
    if breaches:
        print("%d breach%s of src/LAYERS" % (len(breaches), "" if len(breaches) == 1 else "es"))
        return 1
    print("layers hold: %s" % " < ".join(layers()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
