#!/usr/bin/env python3
"""stat_view_check.py - check a tbon_stat viewer page (<exe>.html) in
headless Chromium against its run directory's JSON files.

  stat_view_check.py HTML RUNDIR [--chromium PATH] [--timeout S] [--max-searches N]
  stat_view_check.py HTML RUNDIR --time [--repeat N]

The reference is RUNDIR/<exe>.2D.json, <exe>.3D.json and <exe>.tasks.json
only; the equivalence classes are computed from the trees here
(stat_view_make.classes). Each page load is one Chromium run with a URL
hash (the hooks at the top of stat/view/stat_view.html), its DOM dumped and
parsed with html.parser. Checks, each printed "ok WHAT" or "FAIL WHAT:
DETAILS":
  1. the page loads (body data-ready="1", pre#errors empty), and its
     default view is a consistent part of the 2D tree;
  2. 2D and 3D with expand=all: the rows rebuilt from the DOM are the JSON
     tree (frame, count, tasks or rep, children in order);
  3. the classes listed are the computed ones (count, tasks, rep, ends,
     the attach line of the rep);
  4. search: func:^LEAF$ for each distinct leaf frame of the 2D tree hits
     exactly the nodes of that frame; rank:R for a task of each class hits
     the nodes holding it; host:H the nodes holding any task of H; each
     with its callers expanded and #search-count right; a bad regex shows
     #search-error and no error;
  5. focus=ID shows exactly that subtree and its path in #crumbs; select=ID
     shows the node and the attach line of its lowest task; class=I marks
     the nodes holding its rep.
The last line: "stat_view_check: N passed, M failed"; exit status 1 if any
failed, 2 for bad arguments or no Chromium.

--time loads the page --repeat times with no hash and prints the median
data-render-ms and data-load-ms of the page and wall-clock seconds of the
Chromium run.

Chromium runs headless in its own process group with a fresh profile and
TMPDIR (removed after); this process is a child subreaper, so whatever
Chromium leaves behind is reaped or killed, by pid, before the next run.
Python 3 standard library only.
"""
import argparse
import ctypes
import html.parser
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True   # (nothing left beside the scripts)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stat_view_make as svm  # noqa: E402  (the class computation, task sets)

VOID = {'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'param',
        'source', 'track', 'wbr'}


# ---------- Chromium

def become_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def my_children():
    me = os.getpid()
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(')') + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(d))
    return out


def reap_leftovers():
    """Kill and reap what Chromium left (reparented to us, the subreaper)."""
    for _ in range(50):
        kids = my_children()
        if not kids:
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in kids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        time.sleep(0.02)


def chromium(exe, url, timeout, extra=()):
    """(dumped DOM text, wall seconds, stderr tail) of one headless run.
    Its profile and its TMPDIR are in one temporary directory, removed
    after (a killed Chromium leaves its /tmp files there)."""
    run = tempfile.mkdtemp(prefix='stat_view_check.')
    prof, tmp = os.path.join(run, 'profile'), os.path.join(run, 'tmp')
    os.mkdir(prof)
    os.mkdir(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    cmd = [exe, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
           '--no-first-run', '--no-default-browser-check', '--user-data-dir=' + prof,
           '--virtual-time-budget=10000'] + list(extra) + ['--dump-dom', url]
    t0 = time.monotonic()
    late = ''
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        late = 'timed out after %g s' % timeout
    finally:
        wall = time.monotonic() - t0
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        reap_leftovers()
        shutil.rmtree(run, ignore_errors=True)
    lines = [l for l in err.decode('utf-8', 'replace').splitlines() if l.strip() and 'dbus' not in l]
    return out.decode('utf-8', 'replace'), wall, '\n'.join(lines[-3:] + ([late] if late else []))


# ---------- the dumped DOM

class Elem:
    __slots__ = ('tag', 'attrs', 'kids', 'parent', 'text')

    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.kids, self.text = tag, attrs, parent, [], []

    def cls(self):
        return (self.attrs.get('class') or '').split()

    def all_text(self):
        out = []

        def rec(e):
            for k in e.kids:
                if isinstance(k, str):
                    out.append(k)
                else:
                    rec(k)
        rec(self)
        return ''.join(out)

    def iter(self):
        stack = [self]
        while stack:
            e = stack.pop()
            yield e
            stack.extend(k for k in reversed(e.kids) if not isinstance(k, str))


class DomParser(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Elem('#doc', {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        e = Elem(tag, {k: (v if v is not None else '') for k, v in attrs}, self.cur)
        self.cur.kids.append(e)
        if tag not in VOID:
            self.cur = e

    def handle_startendtag(self, tag, attrs):
        self.cur.kids.append(Elem(tag, {k: (v if v is not None else '') for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        e = self.cur
        while e is not self.root and e.tag != tag:
            e = e.parent
        if e is not self.root:
            self.cur = e.parent

    def handle_data(self, data):
        self.cur.kids.append(data)


class Page:
    def __init__(self, text):
        p = DomParser()
        p.feed(text)
        p.close()
        self.doc = p.root
        self.ids = {}
        self.body = None
        for e in self.doc.iter():
            if 'id' in e.attrs and e.attrs['id'] not in self.ids:
                self.ids[e.attrs['id']] = e
            if e.tag == 'body' and self.body is None:
                self.body = e

    def by_id(self, i):
        return self.ids.get(i)

    def text(self, i):
        e = self.by_id(i)
        return None if e is None else e.all_text()

    def rows(self):
        """The tree rows under ul#tree: the list of top rows, each
        {"id", "count", "tasks", "rep", "frame", "cls", "children"}."""
        top = []
        tree = self.by_id('tree')
        if tree is None:
            return top

        def rec(e, row):
            for k in e.kids:
                if isinstance(k, str):
                    continue
                if 'data-id' in k.attrs:
                    r = {'id': int(k.attrs['data-id']), 'count': int(k.attrs.get('data-count', '-1')),
                         'tasks': k.attrs.get('data-tasks'), 'rep': k.attrs.get('data-rep'),
                         'frame': None, 'cls': k.cls(), 'children': []}
                    (row['children'] if row else top).append(r)
                    rec(k, r)
                else:
                    if row is not None and row['frame'] is None and 'frame' in k.cls():
                        row['frame'] = k.all_text()
                        continue
                    rec(k, row)
        rec(tree, None)
        return top


def flat(rows):
    out = []
    stack = list(reversed(rows))
    while stack:
        r = stack.pop()
        out.append(r)
        stack.extend(reversed(r['children']))
    return out


# ---------- the reference

class Ref:
    """A tree of the run directory, flattened in pre-order."""

    def __init__(self, tree):
        self.tree = tree
        nodes = svm.preorder(tree)
        self.n = len(nodes)
        self.node = [nd for _, nd, _, _ in nodes]
        self.parent = [p for _, _, p, _ in nodes]
        self.kids = [[] for _ in nodes]
        for i, p in enumerate(self.parent):
            if p >= 0:
                self.kids[p].append(i)
        self.sets = [svm.node_tasks(nd) for nd in self.node]
        self.counts_only = self.sets[0] is None
        self.frame = [nd['frame'] for nd in self.node]

    def path(self, i):
        out = []
        while i >= 0:
            out.append(i)
            i = self.parent[i]
        return out[::-1]

    def subtree(self, i):
        out = []
        stack = [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(reversed(self.kids[j]))
        return out

    def holding(self, tasks, within=None):
        ids = within if within is not None else range(self.n)
        return sorted(i for i in ids if self.sets[i] & tasks)

    def lowest(self, i):
        if self.counts_only:
            return self.node[i].get('rep')
        return min(self.sets[i]) if self.sets[i] else None


def is_local(host, me):
    """tbon_stat's rule (st_is_this_host, data.host being gethostname)."""
    if host is None or host == '' or host == 'localhost':
        return True
    return bool(me) and (host == me or host == me.split('.')[0])


def attach_line(task, tasks, me):
    r = tasks.get(task)
    if r is None or r.get('pid') is None:
        return None
    if is_local(r.get('host'), me):
        return 'gdb -p %d' % r['pid']
    return 'ssh -t %s gdb -p %d' % (r['host'], r['pid'])


def js_regex_escape(s):
    return re.sub(r'([\\^$.*+?()\[\]{}|/])', r'\\\1', s)


# ---------- checks

class Checker:
    def __init__(self, a):
        self.a = a
        self.passed = self.failed = 0
        self.runs = 0
        self.url = 'file://' + urllib.parse.quote(os.path.abspath(a.html))
        exe, trees, tasks, _ = svm.read_rundir(a.rundir, a.exe)
        self.exe = exe
        self.refs = {k: Ref(t) for k, t in trees.items()}
        self.tasks = {t['task']: t for t in tasks}
        self.me = None

    def result(self, ok, what, details=''):
        if ok:
            self.passed += 1
            print('ok %s' % what)
        else:
            self.failed += 1
            print('FAIL %s: %s' % (what, details))
        sys.stdout.flush()
        return ok

    def load(self, hash_, what):
        """The page at URL#hash_, or None (a failure printed) if it did not
        load cleanly."""
        url = self.url + ('#' + hash_ if hash_ else '')
        text, wall, err = chromium(self.a.chromium, url, self.a.timeout)
        self.runs += 1
        pg = Page(text)
        body = pg.body
        if body is None or body.attrs.get('data-ready') != '1':
            self.result(False, what + ' (load #%s)' % (hash_ or '-'), 'no body data-ready="1" after %.1f s%s'
                        % (wall, ('; chromium: ' + err) if err else ''))
            return None
        errs = (pg.text('errors') or '').strip()
        if errs:
            self.result(False, what + ' (load #%s)' % (hash_ or '-'), 'pre#errors: ' + errs[:800])
            return None
        return pg

    def page_host(self, pg):
        """The front-end host the page has (its data), for the attach lines."""
        if self.me is None:
            raw = pg.text('stat-data') or ''
            cut = raw.find('</script')
            if cut >= 0:
                raw = raw[:cut]
            try:
                self.me = json.loads(raw).get('host')
            except ValueError:
                self.me = ''
        return self.me

    # 2. the whole tree
    def compare_tree(self, ref, rows, root=0):
        """None if the rows are exactly ref's subtree at root, else the
        first difference."""
        if len(rows) != 1:
            return 'want one row at the top (node %d), found %d' % (root, len(rows))

        def rec(i, r, where):
            nd = ref.node[i]
            path = (where + ' > ' if where else '') + repr(nd['frame'])
            if r['id'] != i:
                return '%s: data-id %d, want %d' % (path, r['id'], i)
            if r['frame'] != nd['frame']:
                return '%s: frame %r, want %r' % (path, r['frame'], nd['frame'])
            if r['count'] != nd['count']:
                return '%s: data-count %d, want %d' % (path, r['count'], nd['count'])
            if ref.counts_only:
                if r['rep'] is None or int(r['rep']) != nd.get('rep'):
                    return '%s: data-rep %r, want %r' % (path, r['rep'], nd.get('rep'))
            elif r['tasks'] != nd['tasks']:
                return '%s: data-tasks %r, want %r' % (path, r['tasks'], nd['tasks'])
            want, got = ref.kids[i], r['children']
            if len(got) != len(want):
                return '%s: %d children shown, want %d (%s)' % (
                    path, len(got), len(want), ', '.join(repr(ref.frame[k]) for k in want[:6]))
            for k, g in zip(want, got):
                d = rec(k, g, path)
                if d:
                    return d
            return None
        sys.setrecursionlimit(max(10000, 4 * ref.n))
        return rec(root, rows[0], '')

    def check_partial(self, ref, rows, what):
        """The default view: rows in the right places, each node's children
        all shown or none."""
        fl = flat(rows)
        bad = None
        if not rows or rows[0]['id'] != 0:
            bad = 'the root is not the top row'
        for r in fl:
            if bad:
                break
            i = r['id']
            if not 0 <= i < ref.n:
                bad = 'row data-id %d not in the tree' % i
            elif r['frame'] != ref.frame[i] or r['count'] != ref.node[i]['count']:
                bad = 'row %d: %r %d, want %r %d' % (i, r['frame'], r['count'], ref.frame[i],
                                                     ref.node[i]['count'])
            elif r['children'] and [c['id'] for c in r['children']] != ref.kids[i]:
                bad = 'row %d: children %s, want %s' % (i, [c['id'] for c in r['children']][:8],
                                                        ref.kids[i][:8])
        self.result(bad is None, what, bad or '')
        return len(fl)

    def check_classes(self, pg, key):
        ref = self.refs[key]
        box = pg.by_id('classes')
        what = 'classes %s' % key
        if box is None:
            return self.result(False, what, 'no #classes')
        items = [e for e in box.iter() if 'cls' in e.cls() and 'data-index' in e.attrs]
        if ref.counts_only:
            return self.result(not items and 'task lists' in box.all_text(), what + ' (counts only)',
                               'want no class and a note that classes need task lists; found %d' % len(items))
        want = svm.classes(ref.tree)
        me = self.page_host(pg)
        n = int(box.attrs.get('data-n', '-1'))
        if n != len(want):
            return self.result(False, what, '#classes data-n %d, want %d' % (n, len(want)))
        if len(items) < min(len(want), 100) or len(items) > len(want):
            return self.result(False, what, '%d classes listed, want %d' % (len(items), len(want)))
        for i, (e, c) in enumerate(zip(items, want)):
            at = e.attrs
            got = (int(at.get('data-index', -1)), int(at.get('data-count', -1)), at.get('data-tasks'),
                   int(at.get('data-rep', -1)),
                   [int(x) for x in at.get('data-ends', '').split(',') if x != ''])
            exp = (i, c['count'], c['tasks'], c['rep'], c['ends'])
            if got != exp:
                return self.result(False, what, 'class %d shown as %r, want %r' % (i, got, exp))
            att = [x for x in e.iter() if 'attach' in x.cls()]
            line = attach_line(c['rep'], self.tasks, me)
            if line is not None and (not att or att[0].all_text() != line):
                return self.result(False, what, 'class %d: attach line %r, want %r'
                                   % (i, att[0].all_text() if att else None, line))
        return self.result(True, what + ' (%d, attach lines included)' % len(want))

    def check_hits(self, pg, key, want, what, within=None):
        ref = self.refs[key]
        fl = flat(pg.rows())
        shown = {r['id'] for r in fl}
        got = sorted(r['id'] for r in fl if 'hit' in r['cls'])
        cnt = pg.by_id('search-count')
        n = int(cnt.attrs.get('data-n', '-1')) if cnt is not None else None
        err = (pg.text('search-error') or '').strip()
        if err:
            return self.result(False, what, 'search error: ' + err)
        missing = [i for i in want if i not in shown]
        if missing:
            return self.result(False, what, '%d matches not shown (callers not expanded): %s'
                               % (len(missing), missing[:10]))
        if got != want:
            extra = sorted(set(got) - set(want))[:10]
            lack = sorted(set(want) - set(got))[:10]
            return self.result(False, what, '%d hits, want %d; extra %s, missing %s (%s)'
                               % (len(got), len(want), extra, lack,
                                  ', '.join(repr(ref.frame[i]) for i in (extra + lack)[:4])))
        if n != len(want):
            return self.result(False, what, '#search-count data-n %r, want %d' % (n, len(want)))
        return self.result(True, what + ' (%d hits)' % len(want))

    def run(self):
        a = self.a
        keys = [k for k in ('2D', '3D') if k in self.refs]
        if not keys:
            print('FAIL reference: no tree in %s' % a.rundir)
            return 1
        k0 = keys[0]
        r0 = self.refs[k0]

        # 1. load, default view
        pg = self.load('', 'page loads')
        if pg:
            self.result(True, 'page loads (ready, no error, %s ms)' % pg.body.attrs.get('data-render-ms'))
            title = pg.text('exe') or ''
            self.result(title.strip() == self.exe, 'header names %s' % self.exe, 'header says %r' % title)
            n = self.check_partial(r0, pg.rows(), 'default view is part of the %s tree' % k0)
            print('   (default view: %d of %d rows)' % (n, r0.n))

        # 2. + 3. each tree whole, its classes
        for k in keys:
            pg = self.load('tree=%s&expand=all' % k, 'tree %s' % k)
            if not pg:
                continue
            d = self.compare_tree(self.refs[k], pg.rows())
            self.result(d is None, 'tree %s equals %s.%s.json (%d nodes)' % (k, self.exe, k, self.refs[k].n), d)
            self.check_classes(pg, k)

        # 4. search
        leaves = []
        for i in range(r0.n):
            if not r0.kids[i] and r0.frame[i] not in leaves:
                leaves.append(r0.frame[i])
        for f in spread(leaves, a.max_searches):
            q = 'func:^' + js_regex_escape(f) + '$'
            pg = self.load('tree=%s&search=%s' % (k0, urllib.parse.quote(q, safe='')), 'search ' + q)
            if pg:
                self.check_hits(pg, k0, [i for i in range(r0.n) if r0.frame[i] == f], 'search %s' % q)
        if not r0.counts_only:
            want_cls = svm.classes(r0.tree)
            for c in spread(want_cls, a.max_searches):
                t = max(svm.parse_set(c['tasks']))   # a member other than the rep when it can
                rank = self.tasks.get(t, {}).get('rank')
                q = ('rank:%d' % rank) if rank is not None else ('task:%d' % t)
                pg = self.load('tree=%s&search=%s' % (k0, urllib.parse.quote(q, safe='')), 'search ' + q)
                if pg:
                    self.check_hits(pg, k0, r0.holding({t}), 'search %s (task %d)' % (q, t))
            hosts = sorted({t.get('host') for t in self.tasks.values() if t.get('host') is not None})
            for h in spread(hosts, min(2, a.max_searches)):
                ts = {n for n, t in self.tasks.items() if t.get('host') == h}
                q = 'host:' + h
                pg = self.load('tree=%s&search=%s' % (k0, urllib.parse.quote(q, safe='')), 'search ' + q)
                if pg:
                    self.check_hits(pg, k0, r0.holding(ts), 'search %s (%d tasks)' % (q, len(ts)))
        else:
            q = 'rank:0'
            pg = self.load('tree=%s&search=%s' % (k0, urllib.parse.quote(q, safe='')), 'counts only ' + q)
            if pg:
                err = (pg.text('search-error') or '').strip()
                hits = [r for r in flat(pg.rows()) if 'hit' in r['cls']]
                self.result(bool(err) and not hits, 'counts only: %s says %r' % (q, err[:60]),
                            'message %r, %d hits' % (err, len(hits)))
        q = 'func:(unclosed'
        pg = self.load('tree=%s&search=%s' % (k0, urllib.parse.quote(q, safe='')), 'bad regex')
        if pg:
            err = (pg.text('search-error') or '').strip()
            hits = [r for r in flat(pg.rows()) if 'hit' in r['cls']]
            self.result(bool(err) and not hits, 'bad regex %s: message %r, no error' % (q, err[:60]),
                        'message %r, %d hits' % (err, len(hits)))

        # 5. focus + select, class
        f = pick_focus(r0)
        s = min(r0.subtree(f), key=lambda i: (r0.node[i]['count'], -i))
        pg = self.load('tree=%s&expand=all&focus=%d&select=%d' % (k0, f, s), 'focus/select')
        if pg:
            d = self.compare_tree(r0, pg.rows(), f)
            self.result(d is None, 'focus=%d (%s) shows exactly its subtree (%d nodes)'
                        % (f, r0.frame[f], len(r0.subtree(f))), d)
            crumbs = pg.by_id('crumbs')
            got = [int(e.attrs['data-id']) for e in crumbs.iter() if e.tag == 'a' and 'data-id' in e.attrs] \
                if crumbs is not None else None
            self.result(got == r0.path(f), 'focus=%d: #crumbs is its path' % f,
                        'crumbs %s, want %s' % (got, r0.path(f)))
            det = pg.by_id('detail')
            sel = [r['id'] for r in flat(pg.rows()) if 'sel' in r['cls']]
            t = r0.lowest(s)
            line = attach_line(t, self.tasks, self.page_host(pg))
            att = pg.by_id('detail-attach')
            got_line = att.all_text() if att is not None else None
            ok = det is not None and det.attrs.get('data-id') == str(s) and sel == [s] and got_line == line \
                and (att is None or att.attrs.get('data-task') == str(t))
            self.result(ok, 'select=%d (%s): detail, attach line %r of task %s' % (s, r0.frame[s], line, t),
                        'detail data-id %r, selected rows %s, attach %r (task %r), want %r (task %s)'
                        % (det.attrs.get('data-id') if det is not None else None, sel, got_line,
                           att.attrs.get('data-task') if att is not None else None, line, t))
        if not r0.counts_only:
            want_cls = svm.classes(r0.tree)
            ci = min(range(len(want_cls)), key=lambda i: (want_cls[i]['count'], -i))
            rep = want_cls[ci]['rep']
            pg = self.load('tree=%s&class=%d' % (k0, ci), 'class')
            if pg:
                fl = flat(pg.rows())
                got = sorted(r['id'] for r in fl if 'in-class' in r['cls'])
                want = r0.holding({rep})
                det = pg.by_id('detail')
                att = pg.by_id('detail-attach')
                line = attach_line(rep, self.tasks, self.page_host(pg))
                ok = got == want and det is not None and det.attrs.get('data-class') == str(ci) \
                    and (att.all_text() if att is not None else None) == line
                self.result(ok, 'class=%d marks the %d nodes holding rep %d, detail %r'
                            % (ci, len(want), rep, line),
                            'in-class %s, want %s; detail class %r attach %r'
                            % (got[:12], want[:12], det.attrs.get('data-class') if det is not None else None,
                               att.all_text() if att is not None else None))
        print('   (%d chromium runs)' % self.runs)
        print('stat_view_check: %d passed, %d failed' % (self.passed, self.failed))
        return 1 if self.failed else 0

    def timing(self):
        render, load, walls, rows = [], [], [], None
        for i in range(self.a.repeat):
            text, wall, err = chromium(self.a.chromium, self.url, self.a.timeout)
            pg = Page(text)
            b = pg.body
            if b is None or b.attrs.get('data-ready') != '1' or (pg.text('errors') or '').strip():
                print('FAIL load %d: not ready or errors: %s %s' % (i, (pg.text('errors') or '')[:300], err))
                return 1
            render.append(float(b.attrs['data-render-ms']))
            load.append(float(b.attrs['data-load-ms']))
            walls.append(wall)
            rows = b.attrs.get('data-rows')
        size = os.path.getsize(self.a.html)
        print('%s: %d bytes, %s rows shown; %d loads: median render %.1f ms (script start to ready), '
              'load %.1f ms (navigation start to ready), chromium %.2f s wall'
              % (self.a.html, size, rows, len(render), statistics.median(render), statistics.median(load),
                 statistics.median(walls)))
        return 0


def spread(items, n):
    """At most n of items, spread over the list (first and last included)."""
    if n <= 0 or not items:
        return []
    if len(items) <= n:
        return list(items)
    if n == 1:
        return [items[0]]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def pick_focus(ref):
    """A node below the root where the tree branches (the deepest of the
    first branching chain), else the root's first child."""
    i = 0
    while len(ref.kids[i]) == 1:
        i = ref.kids[i][0]
    if i == 0:
        return ref.kids[0][0] if ref.kids[0] else 0
    return i


def main():
    ap = argparse.ArgumentParser(description='check a tbon_stat viewer page in headless Chromium')
    ap.add_argument('html')
    ap.add_argument('rundir')
    ap.add_argument('--exe', help='the executable name (default: from <exe>.tasks.json)')
    ap.add_argument('--chromium', default=shutil.which('chromium') or shutil.which('chromium-browser')
                    or '/usr/bin/chromium')
    ap.add_argument('--timeout', type=float, default=60, help='seconds per Chromium run (default 60)')
    ap.add_argument('--max-searches', type=int, default=6,
                    help='at most this many func: and rank: searches each (default 6)')
    ap.add_argument('--time', action='store_true', help='time the page instead of checking it')
    ap.add_argument('--repeat', type=int, default=5)
    a = ap.parse_args()
    if not os.path.isfile(a.html):
        ap.error('%s: no such file' % a.html)
    if not (a.chromium and os.access(a.chromium, os.X_OK)):
        print('stat_view_check: no Chromium (--chromium PATH)', file=sys.stderr)
        return 2
    become_subreaper()
    c = Checker(a)
    return c.timing() if a.time else c.run()


if __name__ == '__main__':
    sys.exit(main())
