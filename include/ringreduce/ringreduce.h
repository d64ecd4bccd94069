/* ringreduce: a chunked, pipelined ring-allreduce engine over UCX.
 *
 * The C API mirrors NCCL's (rr prefix instead of nccl) so a framework that
 * calls NCCL can switch by renaming. It compiles as C and as C++, and without
 * CUDA installed: streams are opaque pointers.
 *
 * Every call returns an rrResult_t. On failure rrGetLastError() says what was
 * wrong: the argument, the peer, the step and chunk. Out-parameters are
 * written only on success. */
#ifndef RINGREDUCE_RINGREDUCE_H
#define RINGREDUCE_RINGREDUCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include <ringreduce/version.h> /* RR_MAJOR, RR_MINOR, RR_PATCH: generated */

#define RR_VERSION_CODE (RR_MAJOR * 10000 + RR_MINOR * 100 + RR_PATCH)

typedef enum {
  rrSuccess = 0,
  rrUnhandledCudaError = 1,
  rrSystemError = 2,     /* a system call or UCX failed */
  rrInternalError = 3,   /* a bug in ringreduce */
  rrInvalidArgument = 4, /* a bad argument to this call */
  rrInvalidUsage = 5,    /* a call that is wrong in this state */
  rrRemoteError = 6,     /* a peer failed or disappeared */
  rrInProgress = 7,
  rrTimeout = 8,         /* a peer did not answer within the timeout */
  rrRevoked = 9,         /* the communicator was revoked (rrCommRevoke, here or on a peer) */
  rrNumResults = 10
} rrResult_t;

/* Same numbering as ncclDataType_t. */
typedef enum {
  rrInt8 = 0, rrChar = 0,
  rrUint8 = 1,
  rrInt32 = 2, rrInt = 2,
  rrUint32 = 3,
  rrInt64 = 4,
  rrUint64 = 5,
  rrFloat16 = 6, rrHalf = 6,
  rrFloat32 = 7, rrFloat = 7,
  rrFloat64 = 8, rrDouble = 8,
  rrBfloat16 = 9,
  rrNumTypes = 10,
  /* Not a type: makes every int a valid value of the enum, so that a bad
   * value passed from C is an argument error, not undefined behaviour in C++. */
  rrDataTypeIntRange = -0x7fffffff - 1
} rrDataType_t;

/* rrSum..rrAvg: same numbering as ncclRedOp_t. rrAvg: floating types divide
 * the sum by the rank count once, at the end; integer types divide the
 * integer sum (truncating toward zero), as NCCL defines it. rrBand, rrBor,
 * rrBxor: bitwise and, or, xor (MPI_BAND, MPI_BOR, MPI_BXOR), defined for the
 * integer types only; with a floating type (float16, bfloat16, float32,
 * float64) a call is refused with rrInvalidArgument. NCCL has no bitwise ops:
 * its ncclNumOps is 5, here rrNumOps is 8. */
typedef enum {
  rrSum = 0,
  rrProd = 1,
  rrMax = 2,
  rrMin = 3,
  rrAvg = 4,
  rrBand = 5,
  rrBor = 6,
  rrBxor = 7,
  rrNumOps = 8,
  rrRedOpIntRange = -0x7fffffff - 1 /* not an op: see rrDataTypeIntRange */
} rrRedOp_t;

#define RR_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[RR_UNIQUE_ID_BYTES];
} rrUniqueId;

typedef struct rrComm* rrComm_t;

/* Per-communicator settings. Start from RR_CONFIG_INITIALIZER: a field left
 * at its initializer value takes the RR_* environment variable, or else the
 * built-in default (README.md, "Settings"). */
typedef struct {
  size_t size;            /* sizeof(rrConfig_t): lets the struct grow */
  unsigned int magic;     /* RR_CONFIG_MAGIC */
  size_t chunk_bytes;     /* RR_CHUNK_BYTES: largest piece of a segment moved at once */
  int pipeline_depth;     /* RR_PIPELINE_DEPTH: chunk columns in flight at once */
  int timeout_ms;         /* RR_TIMEOUT_MS: deadline of init and of each operation */
  int debug_level;        /* RR_DEBUG: 0 WARN, 1 INFO, 2 TRACE */
  int check_arguments;    /* RR_CHECK_ARGUMENTS: 1 (default) compares every collective's
                             arguments with the ring neighbours' first; 0 skips it */
  size_t gpu_segment_bytes; /* RR_GPU_SEGMENT_BYTES: device buffers are staged through
                               pinned host memory in segments of this size (CUDA build) */
} rrConfig_t;

#define RR_CONFIG_MAGIC 0x72726366u
#define RR_CONFIG_UNDEF_INT (-1)
#define RR_CONFIG_INITIALIZER \
  { sizeof(rrConfig_t), RR_CONFIG_MAGIC, 0, RR_CONFIG_UNDEF_INT, RR_CONFIG_UNDEF_INT, RR_CONFIG_UNDEF_INT, \
    RR_CONFIG_UNDEF_INT, 0 }

rrResult_t rrGetVersion(int* version);
const char* rrGetErrorString(rrResult_t result);
/* The text of the last error on this communicator; with comm == NULL, the last
 * error raised on the calling thread (e.g. by a failed init). Never NULL. */
const char* rrGetLastError(rrComm_t comm);

/* Unique-id bootstrap, as NCCL: one process calls rrGetUniqueId (which starts
 * the rendezvous service in that process), sends the id to every rank out of
 * band, and each rank calls rrCommInitRank. The id carries a random secret
 * that admits ranks to the rendezvous: give it to this job's ranks only. */
rrResult_t rrGetUniqueId(rrUniqueId* unique_id);
rrResult_t rrCommInitRank(rrComm_t* comm, int nranks, rrUniqueId comm_id, int rank);
rrResult_t rrCommInitRankConfig(rrComm_t* comm, int nranks, rrUniqueId comm_id, int rank,
                                const rrConfig_t* config);

/* Init-method URLs as torch.distributed spells them:
 *   "env://"            MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment
 *   "tcp://host:port"   rank 0 serves the rendezvous at host:port
 *   "file:///path"      a file every rank can reach, locked with fcntl
 * rank < 0 or nranks < 0 take RANK / WORLD_SIZE from the environment. */
rrResult_t rrCommInitUrl(rrComm_t* comm, const char* url, int nranks, int rank,
                         const rrConfig_t* config);
/* rrCommInitUrl(comm, "env://", -1, -1, NULL). */
rrResult_t rrCommInitFromEnv(rrComm_t* comm);

/* As MPI_Comm_split / ncclCommSplit: collective over comm; ranks passing the
 * same color >= 0 form *newcomm, ranked by key (ties by rank in comm); a
 * negative color (RR_SPLIT_NOCOLOR) gets *newcomm = NULL. config NULL: the
 * parent's settings; otherwise resolved as at init. The new communicator has
 * its own transport and runs beside its parent, even on another thread. */
#define RR_SPLIT_NOCOLOR (-1)
rrResult_t rrCommSplit(rrComm_t comm, int color, int key, rrComm_t* newcomm, const rrConfig_t* config);

rrResult_t rrCommDestroy(rrComm_t comm);
/* Ends the communicator now, whatever its peers do, as ncclCommAbort: calls
 * running on it in other threads return rrInvalidUsage ("aborted") within
 * about 10 ms, queued and later requests fail the same way, its peers get a
 * notice (their pending calls fail naming this rank), and its resources are
 * freed. Returns within 1 s, normally within a few milliseconds. comm must not
 * be used afterwards; rrTest/rrWait on its requests still answer (with the
 * abort) and release them. */
rrResult_t rrCommAbort(rrComm_t comm);
/* As ULFM's MPI_Comm_revoke (and NCCL 2.27's ncclCommRevoke): from any
 * thread, and whatever its peers do, every pending and later call on comm
 * returns rrRevoked, on this rank and on every other: a call running on
 * another thread here ends within about 10 ms (its next still round), the
 * peers are told (a notice, as a failure's, passed on by each rank that
 * hears it) and their calls end as soon as they hear, wherever they wait
 * (UCX, the same-host slot rings and board). Unlike rrCommAbort the
 * communicator stays allocated and answers queries (rank, count,
 * rrCommGetAsyncError: rrRevoked) until rrCommDestroy, which returns
 * promptly. Returns rrSuccess once the peers were told (at most about
 * 100 ms for a peer that does not take the notice); revoking twice, or a
 * communicator that a failure broke already, is fine. */
rrResult_t rrCommRevoke(rrComm_t comm);
/* As ULFM's MPI_Comm_shrink and NCCL's ncclCommShrink with an exclude list:
 * the ranks not in excludeRanks (nExclude of them; the excluded ranks, dead
 * or alive, do not call) make *newcomm among themselves, ranked densely in
 * the old order, over connections of their own: no store, no new
 * rendezvous. Works on a communicator that a failure or rrCommRevoke broke
 * (the usual case: revoke, then shrink). Every survivor must pass the same
 * list: otherwise each fails with rrInvalidUsage naming both lists; a
 * survivor that dies meanwhile makes the others fail naming it, within the
 * communicator's timeout, and one that fails says so to the others, whose
 * calls then fail at once naming it (none waits out the timeout for it). config: the new communicator's
 * settings (NULL: this one's). comm stays as it was: destroy it. */
rrResult_t rrCommShrink(rrComm_t comm, const int* excludeRanks, int nExclude, rrComm_t* newcomm,
                        const rrConfig_t* config);
/* As ULFM's MPI_Comm_shrink proper: every rank still alive calls it, with
 * no list; they agree among themselves which ranks failed (a fault-tolerant
 * agreement with no coordinator: rank 0 may be the one that died), then
 * shrink those away as rrCommShrink does. Failed means the transport or the
 * process watch reports the rank gone: such a rank is never waited for, also
 * when it dies during the agreement; a rank alive but silent (it did not
 * call) is waited for up to the communicator's timeout, then counted as
 * failed too (a warning names it). When the survivors already saw the same
 * losses (the usual case), one exchange agrees. excludedRanks (NULL, or room
 * for as many ints as comm has ranks) receives the agreed ranks, ascending,
 * and *nExcluded (NULL allowed) their number. After the shrink the
 * survivors agree once more (one exchange when nobody else failed): a rank
 * that died while the new communicator was made, perhaps after some
 * survivors had it and before others did, is then counted by all, who all
 * drop that communicator and shrink again; so every survivor returns the
 * same communicator, or all make another. Each agreement is bounded by
 * about three times the timeout (a silent rank costs one), the making of
 * the new communicator by one. */
rrResult_t rrCommShrinkFailed(rrComm_t comm, rrComm_t* newcomm, int* excludedRanks, int* nExcluded,
                              const rrConfig_t* config);
/* The agreement of rrCommShrinkFailed alone (as ULFM's MPIX_Comm_agree on
 * the failed group): every rank still alive calls it, and all get the same
 * failed ranks, ascending, in failedRanks (room for as many ints as comm has
 * ranks; NULL allowed) and their number in *nFailed (not NULL). For a framework that
 * renumbers its own bookkeeping from the list and then calls rrCommShrink
 * with it (torch's shrink_group). Within about three times the timeout. */
rrResult_t rrCommAgreeFailed(rrComm_t comm, int* failedRanks, int* nFailed);
/* Growing back (as NCCL 2.29's ncclCommGetUniqueId and ncclCommGrow):
 * rrCommGetUniqueId is collective over comm: its rank 0 makes a unique id
 * (its process serves the new communicator's rendezvous, as rrGetUniqueId)
 * and every rank gets it in *uniqueId. The program hands it to the new
 * processes out of band. Then every rank of comm calls rrCommGrow with the
 * same nranks (more than comm's size) and that id, and each new process
 * calls rrCommInitRank(&c, nranks, id, rank) with a rank from comm's size
 * up: *newcomm has comm's ranks at their old numbers and the new ones after
 * them, comm's settings (config NULL) and connections of its own (a new
 * rendezvous through the id); comm stays as it was. Ranks of comm that pass
 * another nranks or id fail with rrInvalidUsage naming both; a new rank
 * that does not come within the timeout fails every rank's rrCommGrow. */
rrResult_t rrCommGetUniqueId(rrComm_t comm, rrUniqueId* uniqueId);
rrResult_t rrCommGrow(rrComm_t comm, int nranks, rrUniqueId uniqueId, rrComm_t* newcomm, const rrConfig_t* config);
/* As ncclCommGetAsyncError: *asyncError = rrSuccess while the communicator is
 * healthy, else the result of the failure that broke it, whether a call here
 * (blocking or async) met it or a peer reported it. */
rrResult_t rrCommGetAsyncError(rrComm_t comm, rrResult_t* asyncError);
/* Writes this rank's view of the communicator (operations issued and done,
 * the one running and what it waits for, queued requests) to stderr, one
 * line each. SIGUSR1 does the same for every communicator of the process
 * (rr-run forwards it to every rank). */
rrResult_t rrCommDump(rrComm_t comm);
rrResult_t rrCommCount(const rrComm_t comm, int* count);
/* The timeout of the operations called on comm after this returns (as
 * torch.distributed.set_timeout): each blocking call, point-to-point wait
 * and Async call takes the value in force when it is called, whenever it
 * runs; a stream-ordered call, the value in force when it runs on its
 * stream. An operation that does not finish within its timeout fails with
 * rrTimeout (within about 0.5 s of it), as with RR_TIMEOUT_MS, which (or
 * the config's timeout_ms) it replaces; init keeps that one. A child of
 * rrCommSplit without a config starts from the value in force. A call
 * with a timeout of its own passes it in a per-call config instead
 * (rrCollConfig_t, the Config forms below). timeout_ms >= 1, else
 * rrInvalidArgument naming it. */
rrResult_t rrCommSetTimeout(rrComm_t comm, int timeout_ms);
rrResult_t rrCommGetTimeout(const rrComm_t comm, int* timeout_ms);
rrResult_t rrCommUserRank(const rrComm_t comm, int* rank);

/* recvbuff[i] = op over ranks of sendbuff[i], on every rank. sendbuff ==
 * recvbuff is in place. stream: NULL for host buffers, blocking. */
rrResult_t rrAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                       rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream);

/* recvbuff (recvcount elements) = op over ranks of sendbuff[rank * recvcount ...];
 * sendbuff holds nranks * recvcount elements. In place: recvbuff ==
 * sendbuff + rank * recvcount elements. Each rank sends (N-1)/N of sendbuff. */
rrResult_t rrReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                           rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, void* stream);

/* recvbuff[r * sendcount ...] = rank r's sendbuff (sendcount elements), on
 * every rank. In place: sendbuff == recvbuff + rank * sendcount elements. */
rrResult_t rrAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                       rrDataType_t datatype, rrComm_t comm, void* stream);

/* recvbuff = root's sendbuff, on every rank (sendbuff is read on the root
 * only; in place: sendbuff == recvbuff). Pipelined along the ring. */
rrResult_t rrBroadcast(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                       int root, rrComm_t comm, void* stream);

/* The root's recvbuff = op over ranks of sendbuff (recvbuff is written on the
 * root only). Pipelined along the ring. */
rrResult_t rrReduce(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                    rrRedOp_t op, int root, rrComm_t comm, void* stream);

/* The root's recvbuff[r * sendcount ...] = rank r's sendbuff (as
 * torch.distributed.gather). In place on the root: sendbuff == recvbuff +
 * root * sendcount elements. */
rrResult_t rrGather(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                    int root, rrComm_t comm, void* stream);

/* Rank r's recvbuff = the root's sendbuff[r * recvcount ...]. */
rrResult_t rrScatter(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype,
                     int root, rrComm_t comm, void* stream);

/* Rank r's recvbuff[p * count ...] = rank p's sendbuff[r * count ...]; both
 * buffers hold nranks * count elements and must not overlap. */
rrResult_t rrAllToAll(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                      rrComm_t comm, void* stream);

/* Uneven all-to-all, as MPI_Alltoallv: rank r's recvbuff[rdispls[p] ...]
 * (recvcounts[p] elements) = rank p's sendbuff[sdispls[r] ...] (its
 * sendcounts[r] elements). Counts and displacements are in elements, indexed
 * by peer rank, nranks of each; blocks may be empty and may lie anywhere in
 * their buffer. My sendcounts[p] must equal rank p's recvcounts[me]: a count
 * that disagrees fails the call on both ranks with rrInvalidUsage naming the
 * peer (with RR_CHECK_ARGUMENTS=0, on the receiving rank with rrRemoteError,
 * and on the others as its notice arrives), never a hang or a truncation.
 * The send blocks and the receive blocks must not overlap (there is no
 * in-place form). Host buffers only: device buffers are refused with
 * rrInvalidArgument naming the buffer (copy them to the host, or use
 * rrAllToAll); with host buffers, stream orders the call as for the other
 * collectives. The arrays are read during the call (a stream-ordered call
 * copies them): the caller may reuse them once it returns. */
rrResult_t rrAllToAllv(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                       void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                       rrDataType_t datatype, rrComm_t comm, void* stream);

/* Returns on each rank once every rank has called it. */
rrResult_t rrBarrier(rrComm_t comm, void* stream);

/* Point-to-point, as NCCL: blocking unless between rrGroupStart and
 * rrGroupEnd, which post every queued send and receive together and return
 * once all completed (so a ring shift where every rank sends and receives
 * cannot deadlock). Messages between one pair arrive in the order sent; the
 * receive's count must equal the send's (an empty message is a message too:
 * a receive of 0 elements waits for a send of 0). */
rrResult_t rrSend(const void* sendbuff, size_t count, rrDataType_t datatype, int peer,
                  rrComm_t comm, void* stream);
rrResult_t rrRecv(void* recvbuff, size_t count, rrDataType_t datatype, int peer,
                  rrComm_t comm, void* stream);
rrResult_t rrGroupStart(void);
rrResult_t rrGroupEnd(void);

/* Non-blocking point-to-point, as torch.distributed's isend/irecv: the
 * transfer starts now; rrTest reports whether it finished and rrWait blocks
 * until it has (within the communicator's timeout). Once rrWait returns, or
 * rrTest sets *done = 1, the request is released and its handle is no longer
 * valid; the buffer may be reused. Requests may be waited in any order. They
 * complete in the order posted between one pair of ranks, interleaved
 * correctly with rrSend/rrRecv. */
typedef struct rrRequest* rrRequest_t;
rrResult_t rrIsend(const void* sendbuff, size_t count, rrDataType_t datatype, int peer,
                   rrComm_t comm, rrRequest_t* request);
rrResult_t rrIrecv(void* recvbuff, size_t count, rrDataType_t datatype, int peer,
                   rrComm_t comm, rrRequest_t* request);
rrResult_t rrTest(rrRequest_t request, int* done);
rrResult_t rrWait(rrRequest_t request);

/* Tagged point-to-point, as MPI's and torch.distributed's send/recv with a
 * tag. tag is 0..2^31-1 (a negative tag is refused naming `tag`); the calls
 * above are tag 0 and interleave with these: rrIsend to a peer and
 * rrIsendTag(..., tag 0) to it match its receives in the order sent.
 * Messages between one pair with the same tag match in the order sent;
 * different tags match independently (a receive of tag 2 takes the first
 * message of tag 2, whatever of tag 1 came before it). A receive's count
 * must equal the message's: longer or shorter is an error naming the peer.
 * A receive's peer may be RR_ANY_SOURCE (also with rrIrecv): it takes the
 * first message of its tag from any rank; rrWaitStatus / rrTestStatus then
 * say which rank sent it. rrSend / rrRecv take a real peer. */
#define RR_ANY_SOURCE (-2)
typedef struct {
  int source;   /* a receive's sender (for RR_ANY_SOURCE, the rank that matched); a send's: this rank */
  int tag;      /* the message's tag */
  size_t count; /* elements received (a receive) or sent (a send) */
} rrStatus_t;
rrResult_t rrIsendTag(const void* sendbuff, size_t count, rrDataType_t datatype, int peer, int tag,
                      rrComm_t comm, rrRequest_t* request);
rrResult_t rrIrecvTag(void* recvbuff, size_t count, rrDataType_t datatype, int peer, int tag,
                      rrComm_t comm, rrRequest_t* request);
/* As rrWait / rrTest, and on success (once *done) *status describes the
 * message; status may be NULL. Collective requests report source = -1,
 * tag = -1, count = 0. */
rrResult_t rrWaitStatus(rrRequest_t request, rrStatus_t* status);
rrResult_t rrTestStatus(rrRequest_t request, int* done, rrStatus_t* status);

/* Non-blocking collectives (torch.distributed's async_op=True): the same
 * arguments as the blocking form, without stream, plus a request finished by
 * rrTest / rrWait. They run in the order issued, which must be the same on
 * every rank (as for blocking calls); several may be in flight on one
 * communicator and their requests may be waited in any order. Blocking calls
 * issued after them run after them. Buffers belong to the call until it
 * finished. Device buffers (CUDA build; not rrAllToAllvAsync's) are ordered
 * on the legacy default stream, as the blocking form's with stream NULL, and
 * the request finishes once the result is in recvbuff (nothing more to
 * synchronize); a failure is the request's and the communicator's async
 * error. */
rrResult_t rrAllReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                            rrRedOp_t op, rrComm_t comm, rrRequest_t* request);
rrResult_t rrReduceScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount,
                                rrDataType_t datatype, rrRedOp_t op, rrComm_t comm, rrRequest_t* request);
rrResult_t rrAllGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                            rrComm_t comm, rrRequest_t* request);
rrResult_t rrBroadcastAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                            int root, rrComm_t comm, rrRequest_t* request);
rrResult_t rrReduceAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                         rrRedOp_t op, int root, rrComm_t comm, rrRequest_t* request);
rrResult_t rrGatherAsync(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                         int root, rrComm_t comm, rrRequest_t* request);
rrResult_t rrScatterAsync(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype,
                          int root, rrComm_t comm, rrRequest_t* request);
rrResult_t rrAllToAllAsync(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                           rrComm_t comm, rrRequest_t* request);
/* Copies the four arrays at the call: the caller may free them at once. */
rrResult_t rrAllToAllvAsync(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                            void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                            rrDataType_t datatype, rrComm_t comm, rrRequest_t* request);
rrResult_t rrBarrierAsync(rrComm_t comm, rrRequest_t* request);

/* Per-call settings, as NCCL 2.31's ncclCollConfig_t: every collective
 * above, blocking and Async, has a Config form taking the same arguments
 * and a trailing config (rrAllReduceConfig, rrAllReduceAsyncConfig, ...).
 * Start from RR_COLL_CONFIG_INITIALIZER and set what the call needs: a field
 * left at its initializer value, or config NULL, takes the communicator's.
 * The call's own value replaces the communicator's for that call only,
 * whichever thread sets another meanwhile (rrCommSetTimeout). A config not
 * made from the initializer (size or magic wrong), or a field out of range,
 * is refused with rrInvalidArgument naming it; nothing is sent. */
typedef struct {
  size_t size;        /* sizeof(rrCollConfig_t): lets the struct grow */
  unsigned int magic; /* RR_COLL_CONFIG_MAGIC */
  int timeout_ms;     /* the call's deadline, >= 1 (RR_CONFIG_UNDEF_INT: the communicator's,
                         rrCommSetTimeout): a blocking or Async call fails with rrTimeout
                         within about 0.5 s of it, as under the communicator's; a
                         stream-ordered call's host half runs under it */
  const char* algorithm; /* rrAllReduce's forms only (NULL: the communicator's, RR_ALGO): the
                            call's schedule, as RR_ALGO spells it ("ring", "rd", "hd",
                            "oneshot", or "auto": the model decides), chosen as RR_ALGO's
                            (device buffers take the ring). Every rank must pass the same:
                            ranks that take different schedules fail the call with
                            rrInvalidUsage saying which each took. Another collective
                            refuses one (but "auto") naming it */
} rrCollConfig_t;

#define RR_COLL_CONFIG_MAGIC 0x72726363u
#define RR_COLL_CONFIG_INITIALIZER { sizeof(rrCollConfig_t), RR_COLL_CONFIG_MAGIC, RR_CONFIG_UNDEF_INT, NULL }

rrResult_t rrAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                             rrRedOp_t op, rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype,
                                 rrRedOp_t op, rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                             rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, int root,
                             rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrReduceConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype, rrRedOp_t op,
                          int root, rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype, int root,
                          rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype, int root,
                           rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrAllToAllConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                            rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrAllToAllvConfig(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                             const size_t* recvcounts, const size_t* rdispls, rrDataType_t datatype, rrComm_t comm,
                             void* stream, const rrCollConfig_t* config);
rrResult_t rrBarrierConfig(rrComm_t comm, void* stream, const rrCollConfig_t* config);
rrResult_t rrAllReduceAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                                  rrRedOp_t op, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrReduceScatterAsyncConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype,
                                      rrRedOp_t op, rrComm_t comm, rrRequest_t* request,
                                      const rrCollConfig_t* config);
rrResult_t rrAllGatherAsyncConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                                  rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrBroadcastAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                                  int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrReduceAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                               rrRedOp_t op, int root, rrComm_t comm, rrRequest_t* request,
                               const rrCollConfig_t* config);
rrResult_t rrGatherAsyncConfig(const void* sendbuff, void* recvbuff, size_t sendcount, rrDataType_t datatype,
                               int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrScatterAsyncConfig(const void* sendbuff, void* recvbuff, size_t recvcount, rrDataType_t datatype,
                                int root, rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrAllToAllAsyncConfig(const void* sendbuff, void* recvbuff, size_t count, rrDataType_t datatype,
                                 rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);
rrResult_t rrAllToAllvAsyncConfig(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                  void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                  rrDataType_t datatype, rrComm_t comm, rrRequest_t* request,
                                  const rrCollConfig_t* config);
rrResult_t rrBarrierAsyncConfig(rrComm_t comm, rrRequest_t* request, const rrCollConfig_t* config);

/* Completion without waiting, as UCC's callbacks: while a callback is set on
 * comm, each Async collective called on it takes that callback and
 * user_data (the ones in force when it is called, as with
 * rrCommSetTimeout) and the engine calls fn(request, result, message,
 * user_data) once, when the call has finished, successfully or not: on the
 * communicator's worker thread, or on the calling thread before the Async
 * call returns if the call finished by then. message is the error's text
 * ("" on success), valid during the call. The engine then releases the
 * request: the caller must not rrTest or rrWait it (they refuse it, as any
 * finished request). fn must return quickly and call nothing of
 * ringreduce's on comm. Every such call gets its callback, also when the
 * communicator is aborted (with that error; rrCommDestroy refuses while
 * one is in flight, as for any request). fn NULL: none
 * (later calls are waited as usual). Point-to-point requests (rrIsend,
 * rrIrecv) take none. */
typedef void (*rrCompletionFn_t)(rrRequest_t request, rrResult_t result, const char* message, void* user_data);
rrResult_t rrCommSetCompletionCallback(rrComm_t comm, rrCompletionFn_t fn, void* user_data);

/* Observability. Bytes this rank has sent to / received from `peer` since
 * the communicator was made: data and ringreduce's own 32-byte operation
 * headers (the argument check), not the transport's protocol headers. On
 * the same-host board a publication counts as sent to each peer that reads
 * it (every peer for a one-shot call's buffer, the ring neighbours for an
 * argument check), header included. */
rrResult_t rrCommGetPeerBytes(const rrComm_t comm, int peer, uint64_t* bytes_sent,
                              uint64_t* bytes_received);
/* The staging pool: bytes it holds and how many times it has allocated. */
rrResult_t rrCommGetPoolStats(const rrComm_t comm, size_t* pool_bytes, uint64_t* allocations);
/* The schedule a host-memory call of `collective` ("allreduce",
 * "reducescatter", "allgather", "broadcast", "reduce", "gather", "scatter",
 * "alltoall", "alltoallv", "barrier") on `count` elements of `datatype` takes
 * on this communicator, as the settings (RR_ALGO, RR_MODEL_*, RR_CHUNK_BYTES)
 * choose it: "ring", "ring (shared memory)" (the ring on same-host slot
 * rings, RR_SAME_HOST), "one-shot (shared memory)" (small calls on a
 * same-host board: every rank publishes its buffer once and reads the
 * others'), "recursive doubling", "halving-doubling", "binomial tree",
 * "chain", "direct" or, on one rank, "local copy". *algorithm is a static
 * string.
 * (Device buffers take the ring for allreduce, through the staging pool.) */
rrResult_t rrCommGetAlgorithm(const rrComm_t comm, const char* collective, size_t count, rrDataType_t datatype,
                              const char** algorithm);
/* The ring's order: order[p] (nranks entries, the caller's array) is the rank
 * at position p of the ring and of the broadcast/reduce chain. With
 * RR_RING_ORDER=topology (the default) each host's ranks are visited one
 * after another, hosts in the order of their lowest rank, so the ring
 * crosses each host's link once in each direction however the launcher
 * numbered the ranks; RR_RING_ORDER=rank keeps 0, 1, ..., N-1. */
rrResult_t rrCommGetRingOrder(const rrComm_t comm, int* order);

#ifdef __cplusplus
}
#endif

#endif /* RINGREDUCE_RINGREDUCE_H */
