#!/usr/bin/env python3
"""stat_view_make.py - build a tbon_stat viewer page (<exe>.html) without
tbon_stat: the template stat/view/stat_view.html with a run's data in place
of its placeholder line, as tbon_stat's writer (stat/st_view.c) does it:
the template's text up to the line that is the placeholder alone, the data
as one line of compact JSON with "/" written "\\/", the rest.

  stat_view_make.py RUNDIR -o OUT.html            # a run directory of tbon_stat
  stat_view_make.py --synthetic 10000 1000 -o big.html --write-rundir DIR

From RUNDIR it reads <exe>.2D.json, <exe>.3D.json, <exe>.tasks.json (and
the samples from <exe>.perf), and computes the equivalence classes from
each tree (classes(), the reference stat_view_check.py uses too): a task
ends at node N when N's set has it and no child's set has it; the tasks
with the same sorted list of end nodes (pre-order numbers, root 0) form a
class; rep = its lowest task; classes ordered by rep.

--synthetic TASKS FRAMES makes up a run instead: TASKS tasks on hosts of
48, ranks a permutation of the task numbers, FRAMES distinct frame names
(some with <, &, quotes, non-ASCII, and "<!--" and "<script>": with only
"/" escaped these make the HTML parser take the page's closing tags into
the data element, which the page copes with; --escape-lt avoids it),
paths of varied depth, tasks
spread over them in blocks with scattered exceptions (many ranges per
set); the 3D tree adds earlier samples' paths to a third of the tasks.
--write-rundir DIR writes the data used (trees, tasks) as a run directory
for stat_view_check.py. --counts-only turns the trees into counts_only
ones (no task sets; "rep", the lowest task, instead; no classes).

Python 3 standard library only.
"""
import argparse
import glob
import json
import os
import random
import sys

PLACEHOLDER = '@STAT_DATA@'
HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.normpath(os.path.join(HERE, '..', '..', 'stat', 'view', 'stat_view.html'))


# ---------- task sets

def parse_set(s):
    """'[0,3-63]' -> sorted list of task numbers."""
    s = s.strip()
    if s.startswith('['):
        s = s[1:]
    if s.endswith(']'):
        s = s[:-1]
    out = []
    for part in s.split(','):
        part = part.strip()
        if not part:
            continue
        if '-' in part[1:]:
            i = part.index('-', 1)
            lo, hi = int(part[:i]), int(part[i + 1:])
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return sorted(set(out))


def fmt_set(tasks):
    """sorted task numbers -> '[0,3-63]'."""
    tasks = sorted(tasks)
    out = []
    i = 0
    while i < len(tasks):
        j = i
        while j + 1 < len(tasks) and tasks[j + 1] == tasks[j] + 1:
            j += 1
        out.append('%d-%d' % (tasks[i], tasks[j]) if j > i else str(tasks[i]))
        i = j + 1
    return '[' + ','.join(out) + ']'


# ---------- trees

def preorder(tree):
    """[(id, node, parent_id, depth)] in pre-order (children in JSON order)."""
    out = []
    stack = [(tree, -1, 0)]
    while stack:
        node, parent, depth = stack.pop()
        out.append((len(out), node, parent, depth))
        pid = len(out) - 1
        for ch in reversed(node.get('children') or []):
            stack.append((ch, pid, depth + 1))
    return out


def node_tasks(node):
    """The node's task numbers (a set), or None in counts_only trees."""
    if 'tasks' not in node:
        return None
    return set(parse_set(node['tasks']))


def classes(tree):
    """The equivalence classes of a tree with task sets (see the module
    doc): [{"tasks", "count", "rep", "ends"}], ordered by rep."""
    nodes = preorder(tree)
    ends = {}
    for nid, node, _, _ in nodes:
        mine = node_tasks(node)
        if mine is None:
            return None
        below = set()
        for ch in node.get('children') or []:
            below |= node_tasks(ch)
        for t in mine - below:
            ends.setdefault(t, []).append(nid)
    groups = {}
    for t in sorted(ends):
        groups.setdefault(tuple(sorted(ends[t])), []).append(t)
    out = [{'tasks': fmt_set(ts), 'count': len(ts), 'rep': ts[0], 'ends': list(key)}
           for key, ts in groups.items()]
    out.sort(key=lambda c: c['rep'])
    return out


def to_counts_only(tree):
    """A copy of tree with "rep" (the lowest task) in place of "tasks"."""
    out = {'frame': tree['frame']}
    ts = parse_set(tree['tasks']) if 'tasks' in tree else None
    out['count'] = tree['count']
    out['rep'] = ts[0] if ts else tree.get('rep')
    out['children'] = [to_counts_only(c) for c in tree.get('children') or []]
    return out


# ---------- a run directory

def find_exe(rundir):
    got = sorted(glob.glob(os.path.join(rundir, '*.tasks.json')))
    if len(got) != 1:
        raise SystemExit('%s: want exactly one <exe>.tasks.json, found %d' % (rundir, len(got)))
    return os.path.basename(got[0])[:-len('.tasks.json')]


def read_rundir(rundir, exe=None):
    """(exe, {"2D": tree, "3D": tree}, tasks, samples) of a run directory."""
    exe = exe or find_exe(rundir)
    trees = {}
    for k in ('2D', '3D'):
        p = os.path.join(rundir, '%s.%s.json' % (exe, k))
        if os.path.exists(p):
            with open(p, encoding='utf-8') as f:
                trees[k] = json.load(f)
    with open(os.path.join(rundir, exe + '.tasks.json'), encoding='utf-8') as f:
        tasks = json.load(f)
    samples = None
    perf = os.path.join(rundir, exe + '.perf')
    if os.path.exists(perf):
        with open(perf) as f:
            for line in f:
                w = line.split()
                if len(w) == 2 and w[0] == 'samples':
                    samples = int(w[1])
    return exe, trees, tasks, samples


def write_rundir(d, exe, trees, tasks):
    os.makedirs(d, exist_ok=True)
    for k, t in trees.items():
        with open(os.path.join(d, '%s.%s.json' % (exe, k)), 'w', encoding='utf-8') as f:
            json.dump(t, f, ensure_ascii=False, separators=(',', ':'))
            f.write('\n')
    with open(os.path.join(d, exe + '.tasks.json'), 'w', encoding='utf-8') as f:
        json.dump(tasks, f, ensure_ascii=False, separators=(',', ':'))
        f.write('\n')


# ---------- the page

def page_json(data, escape_lt=False):
    """The data as tbon_stat writes it: compact, UTF-8, '/' as '\\/'."""
    s = json.dumps(data, ensure_ascii=False, separators=(',', ':')).replace('/', '\\/')
    if escape_lt:
        s = s.replace('<', '\\u003c')
    return s


def build_page(template_text, data, escape_lt=False):
    lines = template_text.split('\n')
    at = [i for i, l in enumerate(lines) if l == PLACEHOLDER]
    if len(at) != 1:
        raise SystemExit('template: want exactly one line "%s", found %d' % (PLACEHOLDER, len(at)))
    lines[at[0]] = page_json(data, escape_lt)
    return '\n'.join(lines)


# ---------- synthetic data

SPICY = ['operator<<', 'std::vector<int, std::allocator<int> >::push_back', 'a&b_merge',
         'quote"d_frame', "it's_mine", 'λ_kernel', 'über_löser', '日本語の関数', 'fire🔥loop',
         '</script><b>not bold</b>', '<!--', '<script>', 'tab\there', '\u2028sep']


def synthetic(ntasks, nframes, seed=1):
    """(exe, trees, tasks) of a made-up run (module doc)."""
    rng = random.Random(seed)
    base = ['_start', '__libc_start_main@@GLIBC_2.34', '__libc_start_call_main', 'main']
    pool = []
    i = 0
    while len(pool) + len(base) < nframes:
        if i < len(SPICY):
            pool.append(SPICY[i])
        else:
            kind = rng.choice(['solver', 'mpi', 'io', 'comm', 'kernel', 'util'])
            pool.append('%s_%s_%d' % (['ns', 'app', 'lib'][i % 3], kind, i))
        i += 1
    pool = pool[:max(0, nframes - len(base))]
    unused = pool[:]
    rng.shuffle(unused)
    used = list(base)
    # Paths: each a tuple of frames, grown from a prefix of an earlier one.
    paths = [tuple(base)]
    target = max(8, nframes // 3)
    while unused or len(paths) < target:
        src = rng.choice(paths)
        cut = rng.randint(min(len(src), len(base)), len(src))
        r = rng.random()
        k = rng.randint(1, 4) if r < 0.55 else rng.randint(5, 14) if r < 0.92 else rng.randint(15, 45)
        new = list(src[:cut])
        for _ in range(k):
            if unused and rng.random() < 0.85:
                f = unused.pop()
                used.append(f)
            else:
                f = rng.choice(used[len(base):] or pool or base)
            new.append(f)
        new = tuple(new)
        if new not in paths:
            paths.append(new)
    paths = paths[1:] or paths
    rng.shuffle(paths)
    # Weights: a few paths hold most tasks, the others are outliers.
    weights = [1.0 / (j + 1) ** 1.6 for j in range(len(paths))]
    # Tasks: blocks of contiguous task numbers on one path, exceptions scattered.
    last = [None] * ntasks
    t = 0
    while t < ntasks:
        n = rng.randint(1, 400)
        p = rng.choices(range(len(paths)), weights)[0]
        for u in range(t, min(ntasks, t + n)):
            last[u] = p if rng.random() > 0.08 else rng.randrange(len(paths))
        t += n
    if len(paths) <= ntasks:      # every path taken by some task now
        for j, u in enumerate(rng.sample(range(ntasks), len(paths))):
            last[u] = j
    seen = []
    for u in range(ntasks):
        s = {last[u]}
        if rng.random() < 0.33:   # earlier samples elsewhere (3D)
            for _ in range(rng.randint(1, 2)):
                s.add(rng.choices(range(len(paths)), weights)[0] if rng.random() < 0.7
                      else rng.randrange(len(paths)))
        seen.append(s)

    def build(assign):
        root = {'frame': '/', 'tasks': set(), 'children': {}}
        for u, ps in enumerate(assign):
            root['tasks'].add(u)
            for p in ps:
                node = root
                for f in paths[p]:
                    node = node['children'].setdefault(f, {'frame': f, 'tasks': set(), 'children': {}})
                    node['tasks'].add(u)

        def out(node):
            kids = sorted(node['children'].values(), key=lambda c: c['frame'].encode('utf-8'))
            return {'frame': node['frame'], 'tasks': fmt_set(node['tasks']), 'count': len(node['tasks']),
                    'children': [out(c) for c in kids]}
        sys.setrecursionlimit(10000)
        return out(root)

    trees = {'2D': build([{p} for p in last]), '3D': build(seen)}
    per_host = 48
    mult = 7919 if ntasks % 7919 else 7907
    tasks = []
    for u in range(ntasks):
        tasks.append({'task': u, 'rank': (u * mult) % ntasks, 'host': 'node%04d' % (u // per_host),
                      'pid': rng.randint(1000, 4000000), 'step': 0 if u % 7 else None})
    return 'synth_app', trees, tasks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('rundir', nargs='?', help="a tbon_stat run directory (<exe>.NNNN)")
    ap.add_argument('-o', '--output', required=True, help='the page to write')
    ap.add_argument('--template', default=TEMPLATE)
    ap.add_argument('--exe', help='the executable name (default: from <exe>.tasks.json)')
    ap.add_argument('--host', help="the front-end's host (default: task 0's host)")
    ap.add_argument('--samples', type=int, help='samples (default: from <exe>.perf, else 1)')
    ap.add_argument('--ranks-from', default=None, help='default: position')
    ap.add_argument('--synthetic', nargs=2, type=int, metavar=('TASKS', 'FRAMES'))
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--counts-only', action='store_true')
    ap.add_argument('--no-classes', action='store_true', help='leave "classes" out (the page computes them)')
    ap.add_argument('--escape-lt', action='store_true', help='also write "<" as \\u003c')
    ap.add_argument('--write-rundir', metavar='DIR', help='write the trees and tasks used here too')
    a = ap.parse_args()
    if bool(a.rundir) == bool(a.synthetic):
        ap.error('give a run directory or --synthetic TASKS FRAMES')
    samples = None
    if a.synthetic:
        exe, trees, tasks = synthetic(a.synthetic[0], a.synthetic[1], a.seed)
        samples = 10
    else:
        exe, trees, tasks, samples = read_rundir(a.rundir, a.exe)
    if a.samples is not None:
        samples = a.samples
    if a.counts_only:
        trees = {k: to_counts_only(t) for k, t in trees.items()}
    host = a.host
    if host is None:
        t0 = [t for t in tasks if t.get('task') == 0]
        host = (t0[0].get('host') if t0 else None) or 'localhost'
    data = {'format': 'tbon_stat-view 1', 'exe': exe, 'host': host,
            'samples': samples if samples is not None else 1,
            'ranks_from': a.ranks_from or ('position' if not a.synthetic else 'SLURM_PROCID'),
            'counts_only': bool(a.counts_only), 'tasks': tasks, 'trees': trees,
            'classes': None if a.counts_only else {k: classes(t) for k, t in trees.items()}}
    if a.no_classes:
        del data['classes']
    with open(a.template, encoding='utf-8') as f:
        text = f.read()
    page = build_page(text, data, a.escape_lt)
    with open(a.output, 'w', encoding='utf-8') as f:
        f.write(page)
    if a.write_rundir:
        write_rundir(a.write_rundir, exe, trees, tasks)
    n = {k: len(preorder(t)) for k, t in trees.items()}
    print('%s: %s, %d tasks, nodes %s, %d bytes' % (a.output, exe, len(tasks),
                                                    ' '.join('%s=%d' % kv for kv in sorted(n.items())),
                                                    len(page.encode('utf-8'))))


if __name__ == '__main__':
    main()
