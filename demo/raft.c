/*
 * raft: Raft leader election and log replication for three nodes, with a durable
 * term, vote and log.
 *
 *     raft ID ADDR0 ADDR1 ADDR2 [--bootstrap | --passive]
 *     e.g.  raft 0 127.0.0.1:7400 127.0.0.1:7401 127.0.0.1:7402 --bootstrap
 *
 * Node ID listens on ADDR<ID>, for its peers and for clients. --bootstrap: on a fresh
 * start (no state file) the node stands for election at once instead of waiting for its
 * election timeout. --passive: the node votes and replicates but never stands for
 * election (a "priority 0" member).
 *
 * The protocol is Raft's (Ongaro and Ousterhout, "In Search of an Understandable
 * Consensus Algorithm", Figure 2), with text lines for RPCs:
 *
 *     RV  term candidate lastIndex lastTerm          RequestVote
 *     RVR term granted voter                         its reply
 *     AE  term leader prevIndex prevTerm commit n t1 v1 ... tn vn    AppendEntries
 *     AER term success follower matchIndex           its reply
 *
 * A node sends its RPCs on a connection it opens to the peer (when it first needs it,
 * and again when it breaks: an RPC whose connection broke is sent again on a new one)
 * and gets the replies there; it answers the RPCs of others on the connections they
 * opened.
 *
 * Election. A follower (or candidate) whose election timeout runs out by its clock
 * (clock_gettime through libc) increments its term, votes for itself and asks for votes.
 * It asks its peers one at a time, highest id first, and stops at a majority: in a
 * cluster of three, one vote besides its own decides, so a second request is only sent
 * when the first peer refused. (The paper sends them all at once; asking in turn sends
 * fewer messages and is just as safe.) A node grants its vote to the first candidate of
 * a term whose log is at least as up to date as its own, and saves the vote before it
 * answers.
 *
 * Replication. A new leader appends a no-op entry of its term (the paper's section 8)
 * and sends AppendEntries at once to the peers it has a connection to; every
 * HEARTBEAT_MS it sends AppendEntries to every peer that is not answering one already,
 * opening connections as needed. A refusal walks nextIndex back. An entry of the
 * leader's term is committed once a majority stores it (section 5.4.2); commit indexes
 * travel in AppendEntries.
 *
 * Clients send "PUT <int>" to any node: a leader appends it and answers "OK <int>" once
 * it is committed; any other node answers "NOTLEADER".
 *
 * Durability: term, vote and log live in the file "raft.state", rewritten whole (to a
 * temporary file, fsync, rename, fsync of the directory) before the node answers
 * anything that depends on them.
 *
 * It is written the way such a program ships: blocking sockets, poll with a timeout,
 * files, fsync, no threads. It reports its state for a model checker, which costs
 * nothing outside one: its state as one JSON line on fd 3 after every change; its
 * durable state as one JSON line on fd 193 after every fsync.
 *
 * -DBUG plants a defect: the hard state is saved when the term changes, but granting a
 * vote within a term does not save it. A voter that crashes after voting and comes back
 * in the same term has forgotten its vote, and can vote again for another candidate:
 * two leaders in one term. Without a crash the bug cannot be seen.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STATE_FD     3      /* in-memory state, one JSON line per change */
#define DURABLE_FD   193    /* on-disk state, one JSON line per fsync */
#define STATE_FILE   "raft.state"
#define N            3      /* cluster size */
#define MAJORITY     (N / 2 + 1)
#define MAX_LOG      64
#define MAX_IN       8      /* connections others opened to us (peers, clients) */
#define LINE_LEN     1024
#define ELECTION_MS  300    /* election timeout (plus 50 ms per node id) */
#define HEARTBEAT_MS 100    /* a leader's heartbeat */
#define NOOP         0      /* the value of a leader's no-op entry */
#define MAX_AE       16     /* entries per AppendEntries: the line fits in LINE_LEN */

enum role { FOLLOWER, CANDIDATE, LEADER };
static const char *role_name[] = { "follower", "candidate", "leader" };

struct entry { long term, value; };

/* Persistent state (on disk before we answer). */
static long term;
static int vote = -1;
static struct entry log_[MAX_LOG + 1];    /* 1-based: log_[1..nlog] */
static int nlog;

/* Volatile state. */
static int me, passive, bootstrap, fresh;
static enum role role = FOLLOWER;
static int commit;
static int votes[N];                      /* candidate: who granted us their vote */
static int next_[N], match_[N];           /* leader: per peer */
static int waiting[N];                    /* an RPC to this peer is unanswered */
static int asked[N];                      /* candidate: whom we asked for a vote */
static long long deadline;                /* next election (or heartbeat), our clock */

struct conn { int fd; size_t len; char buf[LINE_LEN]; };
static struct conn out[N];                /* connections we opened, by peer */
static struct conn in[MAX_IN];            /* connections opened to us */
static long client_wait[MAX_IN];          /* in[i] is a client waiting for OK of index */
static long client_value[MAX_IN];
static struct sockaddr_in addr[N];

static void die(const char *what)
{
    fprintf(stderr, "raft %d: %s: %s\n", me, what, strerror(errno));
    exit(1);
}

static long long now_ms(void)
{
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) < 0)
        die("clock_gettime");
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void ensure_open(int fd)
{
    if (fcntl(fd, F_GETFD) >= 0)
        return;
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0 && null != fd) {
        dup2(null, fd);
        close(null);
    }
}

static void parse_addr(const char *s, struct sockaddr_in *sa)
{
    char host[64];
    unsigned short port;
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (sscanf(s, "%63[^:]:%hu", host, &port) != 2 ||
        inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
        fprintf(stderr, "bad address %s (want IP:PORT)\n", s);
        exit(2);
    }
    sa->sin_port = htons(port);
}

/* ---- state lines ---- */

static int put_log(char *p, size_t cap)
{
    int n = snprintf(p, cap, "\"log\":[");
    for (int i = 1; i <= nlog; i++) {
        if (log_[i].value == NOOP)
            n += snprintf(p + n, cap - n, "%s[%ld,\"noop\"]", i > 1 ? "," : "", log_[i].term);
        else
            n += snprintf(p + n, cap - n, "%s[%ld,%ld]", i > 1 ? "," : "", log_[i].term,
                          log_[i].value);
    }
    return n + snprintf(p + n, cap - n, "]");
}

static int put_ints(char *p, size_t cap, const char *name, const int *v, int skip_zero)
{
    int n = snprintf(p, cap, ",\"%s\":[", name), first = 1;
    for (int i = 0; i < N; i++) {
        if (skip_zero && !v[i])
            continue;
        n += snprintf(p + n, cap - n, "%s%d", first ? "" : ",", skip_zero ? i : v[i]);
        first = 0;
    }
    return n + snprintf(p + n, cap - n, "]");
}

/* Everything that decides what this node does next, canonically. */
static void emit_state(void)
{
    char line[256 + MAX_LOG * 48];         /* an entry takes up to 44: [term,value], */
    int n = snprintf(line, sizeof line, "{\"id\":%d,\"role\":\"%s\",\"term\":%ld,\"vote\":",
                     me, role_name[role], term);
    n += vote < 0 ? snprintf(line + n, sizeof line - n, "null,")
                  : snprintf(line + n, sizeof line - n, "%d,", vote);
    n += put_log(line + n, sizeof line - n);
    n += snprintf(line + n, sizeof line - n, ",\"commit\":%d", commit);
    if (role == CANDIDATE) {
        n += put_ints(line + n, sizeof line - n, "votes", votes, 1);
        n += put_ints(line + n, sizeof line - n, "asked", asked, 1);
    }
    if (role == LEADER) {
        n += put_ints(line + n, sizeof line - n, "next", next_, 0);
        n += put_ints(line + n, sizeof line - n, "match", match_, 0);
    }
    if (role != FOLLOWER)
        n += put_ints(line + n, sizeof line - n, "waiting", waiting, 1);
    snprintf(line + n, sizeof line - n, "}\n");
    write_all(STATE_FD, line, strlen(line));
}

static void emit_durable(void)
{
    char line[128 + MAX_LOG * 48];
    int n = snprintf(line, sizeof line, "{\"term\":%ld,\"vote\":", term);
    n += vote < 0 ? snprintf(line + n, sizeof line - n, "null,")
                  : snprintf(line + n, sizeof line - n, "%d,", vote);
    n += put_log(line + n, sizeof line - n);
    snprintf(line + n, sizeof line - n, "}\n");
    write_all(DURABLE_FD, line, strlen(line));
}

/* ---- durability ---- */

static void save(void)
{
    char text[64 + MAX_LOG * 48];
    int n = snprintf(text, sizeof text, "term %ld\nvote %d\n", term, vote);
    for (int i = 1; i <= nlog; i++)
        n += snprintf(text + n, sizeof text - n, "entry %ld %ld\n", log_[i].term, log_[i].value);
    int fd = open(STATE_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write_all(fd, text, (size_t)n) < 0 || fsync(fd) < 0 || close(fd) < 0)
        die(STATE_FILE ".tmp");
    if (rename(STATE_FILE ".tmp", STATE_FILE) < 0)
        die("rename");
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    if (dir < 0 || fsync(dir) < 0)
        die("fsync .");
    close(dir);
    emit_durable();
}

static void load(void)
{
    FILE *f = fopen(STATE_FILE, "r");
    fresh = !f;
    if (!f)
        return;                   /* a fresh node: term 0, no vote, empty log */
    char line[128];
    struct entry e;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "term %ld", &term) == 1 || sscanf(line, "vote %d", &vote) == 1)
            continue;
        if (sscanf(line, "entry %ld %ld", &e.term, &e.value) == 2 && nlog < MAX_LOG)
            log_[++nlog] = e;
    }
    fclose(f);
    emit_durable();
}

/* ---- connections ---- */

static void close_conn(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

static int send_line(struct conn *c, const char *line)
{
    size_t len = strlen(line);
    const char *p = line;
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int take_line(struct conn *c, char *line, size_t cap)
{
    char *nl = memchr(c->buf, '\n', c->len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - c->buf), used = n + 1;
    if (n >= cap)
        n = cap - 1;
    memcpy(line, c->buf, n);
    line[n] = '\0';
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    return 1;
}

/* ---- RPCs we send ---- */

static long term_at(int i) { return i >= 1 && i <= nlog ? log_[i].term : 0; }

static void rpc_text(int peer, char *line, size_t cap)
{
    if (role == CANDIDATE) {
        snprintf(line, cap, "RV %ld %d %d %ld\n", term, me, nlog, term_at(nlog));
        return;
    }
    int prev = next_[peer] - 1, count = nlog - prev;
    if (count > MAX_AE)
        count = MAX_AE;           /* the rest goes in the next one ("more to send") */
    int n = snprintf(line, cap, "AE %ld %d %d %ld %d %d", term, me, prev, term_at(prev),
                     commit, count);
    for (int i = prev + 1; i <= prev + count; i++)
        n += snprintf(line + n, cap - n, " %ld %ld", log_[i].term, log_[i].value);
    snprintf(line + n, cap - n, "\n");
}

/* Send our current RPC (RequestVote as a candidate, AppendEntries as a leader) to
 * peer, on the connection we opened to it, opening it first if need be. */
static void emit_state(void);

static void send_rpc(int peer)
{
    char line[LINE_LEN];
    emit_state();                 /* what we are now, before connect may block */
    rpc_text(peer, line, sizeof line);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (out[peer].fd < 0) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0)
                die("socket");
            if (connect(fd, (const struct sockaddr *)&addr[peer], sizeof addr[peer]) < 0) {
                close(fd);
                return;           /* down: the next event that needs it tries again */
            }
            out[peer] = (struct conn){ .fd = fd };
        }
        if (send_line(&out[peer], line) == 0) {
            waiting[peer] = 1;
            return;
        }
        close_conn(&out[peer]);   /* broke since we last used it: once more, anew */
    }
}

/* The leader: send to every peer that is not answering an RPC already; with `now`, only
 * on the connections we have (the others hear from us at the next heartbeat). */
static void replicate(int now)
{
    for (int p = 0; p < N; p++)
        if (p != me && !waiting[p] && (!now || out[p].fd >= 0))
            send_rpc(p);
}

/* The candidate: ask the next peer we have not asked yet; 0 if there is none. */
static int ask_next(void)
{
    for (int p = N - 1; p >= 0; p--)
        if (p != me && !asked[p]) {
            asked[p] = 1;
            send_rpc(p);
            return 1;
        }
    return 0;
}

/* ---- roles ---- */

static void reset_timer(void)
{
    deadline = now_ms() + (role == LEADER ? HEARTBEAT_MS : ELECTION_MS + 50 * me);
}

static void become_follower(long t)
{
    if (t > term) {
        term = t;
        vote = -1;
        save();                   /* a new term is saved at once, in both builds */
    }
    role = FOLLOWER;
    memset(waiting, 0, sizeof waiting);
    reset_timer();
}

static void start_election(void)
{
    term++;
    vote = me;
    save();
    role = CANDIDATE;
    memset(votes, 0, sizeof votes);
    memset(waiting, 0, sizeof waiting);
    memset(asked, 0, sizeof asked);
    votes[me] = 1;
    printf("raft %d: election for term %ld\n", me, term);
    reset_timer();
    ask_next();
}

/* Append an entry; a full log stops the node (its entries are never compacted). */
static void append(long t, long value)
{
    if (nlog == MAX_LOG) {
        errno = ENOSPC;
        die("log full");
    }
    log_[++nlog] = (struct entry){ t, value };
}

static void become_leader(void)
{
    role = LEADER;
    printf("raft %d: leader of term %ld\n", me, term);
    append(term, NOOP);           /* a no-op of our own term */
    save();
    memset(waiting, 0, sizeof waiting);
    for (int p = 0; p < N; p++) {
        next_[p] = nlog;          /* send the no-op; a refusal walks back */
        match_[p] = p == me ? nlog : 0;
    }
    reset_timer();
    replicate(1);
}

static void answer_clients(void)
{
    for (int i = 0; i < MAX_IN; i++) {
        if (in[i].fd < 0 || client_wait[i] == 0 || client_wait[i] > commit)
            continue;
        char line[48];
        long idx = client_wait[i];
        int ok = idx <= nlog && log_[idx].value == client_value[i] && role == LEADER;
        snprintf(line, sizeof line, ok ? "OK %ld\n" : "NOTLEADER\n", client_value[i]);
        client_wait[i] = 0;
        if (send_line(&in[i], line) < 0)
            close_conn(&in[i]);
    }
}

/* The leader: commit what a majority stores, of our term (Raft's section 5.4.2). */
static void advance_commit(void)
{
    int old = commit;
    for (int idx = nlog; idx > commit; idx--) {
        int count = 0;
        for (int p = 0; p < N; p++)
            count += match_[p] >= idx;
        if (count >= MAJORITY && log_[idx].term == term) {
            commit = idx;
            break;
        }
    }
    if (commit > old) {
        answer_clients();
        replicate(1);             /* tell the followers the new commit index */
    }
}

/* ---- RPCs we receive ---- */

static void on_request_vote(struct conn *c, long t, int cand, int last_idx, long last_term)
{
    if (t > term)
        become_follower(t);
    int up_to_date = last_term > term_at(nlog) || (last_term == term_at(nlog) && last_idx >= nlog);
    int granted = t == term && (vote < 0 || vote == cand) && up_to_date;
    if (granted && vote != cand) {
        vote = cand;
#ifdef BUG
        /* BUG: no save(): the vote lives in memory only, until the next term change. */
#else
        save();                   /* the vote is on disk before it is given */
#endif
        reset_timer();
    }
    char line[64];
    snprintf(line, sizeof line, "RVR %ld %d %d\n", term, granted, me);
    if (send_line(c, line) < 0)
        close_conn(c);
}

static void on_append_entries(struct conn *c, char *args)
{
    long t, prev_term;
    int leader, prev, lcommit, n, used;
    int success = 0, match = 0;
    if (sscanf(args, "%ld %d %d %ld %d %d%n", &t, &leader, &prev, &prev_term, &lcommit, &n,
               &used) != 6)
        return;
    args += used;
    if (t >= term) {
        become_follower(t);
        if (prev >= 0 && prev <= nlog && term_at(prev) == prev_term) {
            int changed = 0;
            for (int k = 1; k <= n && prev + k <= MAX_LOG; k++) {
                struct entry e;
                if (sscanf(args, " %ld %ld%n", &e.term, &e.value, &used) != 2)
                    break;
                args += used;
                int idx = prev + k;
                if (idx <= nlog && log_[idx].term != e.term) {
                    nlog = idx - 1;                 /* a conflict: drop it and all after */
                    changed = 1;
                }
                if (idx > nlog) {
                    log_[++nlog] = e;
                    changed = 1;
                }
                match = idx;
            }
            if (n == 0)
                match = prev;
            if (changed)
                save();
            success = 1;
            int known = lcommit < match ? lcommit : match;
            if (known > commit)
                commit = known;
        }
    }
    char line[64];
    snprintf(line, sizeof line, "AER %ld %d %d %d\n", term, success, me, match);
    if (send_line(c, line) < 0)
        close_conn(c);
}

static void on_reply(char *line)
{
    long t;
    int ok, from, match;
    if (sscanf(line, "RVR %ld %d %d", &t, &ok, &from) == 3 && from >= 0 && from < N) {
        if (t > term) {
            become_follower(t);
            return;
        }
        if (role != CANDIDATE || t != term)
            return;
        waiting[from] = 0;
        if (ok)
            votes[from] = 1;
        else
            ask_next();           /* refused: try the next peer */
        int count = 0;
        for (int p = 0; p < N; p++)
            count += votes[p];
        if (count >= MAJORITY)
            become_leader();
    } else if (sscanf(line, "AER %ld %d %d %d", &t, &ok, &from, &match) == 4 &&
               from >= 0 && from < N) {
        if (t > term) {
            become_follower(t);
            return;
        }
        if (role != LEADER || t != term)
            return;
        waiting[from] = 0;
        if (ok) {
            if (match > match_[from])
                match_[from] = match;
            next_[from] = match + 1;
            advance_commit();
            if (next_[from] <= nlog && !waiting[from])
                send_rpc(from);   /* more to send */
        } else if (next_[from] > 1) {
            next_[from]--;        /* walk back to where our logs agree */
            send_rpc(from);
        }
    }
}

static void on_client(int i, long value)
{
    char line[48];
    if (role != LEADER) {
        snprintf(line, sizeof line, "NOTLEADER\n");
        if (send_line(&in[i], line) < 0)
            close_conn(&in[i]);
        return;
    }
    append(term, value);
    save();
    client_wait[i] = nlog;
    client_value[i] = value;
    match_[me] = nlog;
    replicate(1);
}

static void on_line(int i, char *line)
{
    long t, last_term, value;
    int cand, last_idx;
    if (sscanf(line, "RV %ld %d %d %ld", &t, &cand, &last_idx, &last_term) == 4)
        on_request_vote(&in[i], t, cand, last_idx, last_term);
    else if (strncmp(line, "AE ", 3) == 0)
        on_append_entries(&in[i], line + 3);
    else if (sscanf(line, "PUT %ld", &value) == 1 && value != NOOP)
        on_client(i, value);
}

/* ---- the loop ---- */

static void run(void)
{
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(lfd, (const struct sockaddr *)&addr[me], sizeof addr[me]) < 0 || listen(lfd, 16) < 0)
        die("listen");
    for (int p = 0; p < N; p++)
        out[p].fd = -1;
    for (int i = 0; i < MAX_IN; i++)
        in[i].fd = -1;
    reset_timer();
    if (bootstrap && fresh)
        start_election();
    for (;;) {
        emit_state();
        struct pollfd pfd[1 + N + MAX_IN];
        pfd[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
        for (int p = 0; p < N; p++)
            pfd[1 + p] = (struct pollfd){ .fd = out[p].fd, .events = POLLIN };
        for (int i = 0; i < MAX_IN; i++)
            pfd[1 + N + i] = (struct pollfd){ .fd = in[i].fd, .events = POLLIN };
        int timeout = -1;         /* a passive follower only waits for messages */
        if (role == LEADER || !passive) {
            long long left = deadline - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
        int ready = poll(pfd, 1 + N + MAX_IN, timeout);
        if (ready < 0) {
            if (errno == EINTR)
                continue;
            die("poll");
        }
        if (ready == 0) {
            if (now_ms() < deadline)
                continue;
            if (role == LEADER) {
                reset_timer();
                replicate(0);     /* heartbeat */
            } else if (!passive) {
                start_election();
            }
            continue;
        }
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL), i = 0;
            while (i < MAX_IN && in[i].fd >= 0)
                i++;
            if (fd >= 0 && i == MAX_IN)
                close(fd);
            else if (fd >= 0) {
                in[i] = (struct conn){ .fd = fd };
                client_wait[i] = 0;
            }
        }
        char line[LINE_LEN];
        for (int p = 0; p < N; p++) {             /* replies to our RPCs */
            if (out[p].fd < 0 || pfd[1 + p].revents == 0)
                continue;
            ssize_t n = out[p].len < sizeof out[p].buf
                ? recv(out[p].fd, out[p].buf + out[p].len, sizeof out[p].buf - out[p].len, 0)
                : -1;
            if (n <= 0) {                         /* the peer went away */
                close_conn(&out[p]);
                if (waiting[p] && role != FOLLOWER)
                    send_rpc(p);                  /* ask again, on a new connection */
                continue;
            }
            out[p].len += (size_t)n;
            while (out[p].fd >= 0 && take_line(&out[p], line, sizeof line))
                on_reply(line);
        }
        for (int i = 0; i < MAX_IN; i++) {        /* RPCs of others, client requests */
            if (in[i].fd < 0 || pfd[1 + N + i].revents == 0)
                continue;
            ssize_t n = in[i].len < sizeof in[i].buf
                ? recv(in[i].fd, in[i].buf + in[i].len, sizeof in[i].buf - in[i].len, 0)
                : -1;
            if (n <= 0) {
                close_conn(&in[i]);
                client_wait[i] = 0;
                continue;
            }
            in[i].len += (size_t)n;
            while (in[i].fd >= 0 && take_line(&in[i], line, sizeof line))
                on_line(i, line);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6 || (argc == 6 && strcmp(argv[5], "--passive") != 0 &&
                                 strcmp(argv[5], "--bootstrap") != 0)) {
        fprintf(stderr, "usage: raft ID ADDR0 ADDR1 ADDR2 [--bootstrap | --passive]\n");
        return 2;
    }
    me = atoi(argv[1]);
    if (me < 0 || me >= N) {
        fprintf(stderr, "raft: ID must be 0, 1 or 2\n");
        return 2;
    }
    passive = argc == 6 && strcmp(argv[5], "--passive") == 0;
    bootstrap = argc == 6 && strcmp(argv[5], "--bootstrap") == 0;
    for (int i = 0; i < N; i++)
        parse_addr(argv[2 + i], &addr[i]);
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    ensure_open(STATE_FD);
    ensure_open(DURABLE_FD);
    load();
    run();
    return 0;
}
