// BAL reader and writer.
//
// Reading, by default (BalReadOptions::parallel): the file is read whole into memory
// (ReadFileBytes, several threads), a ".bz2" is decoded over its blocks on all threads
// (bz2_parallel.h), and the text is parsed on all threads (bal_parallel.cc). Both
// parallel stages either give exactly the serial result or decline; then the serial
// reader below runs on the same bytes, so every error message is the serial one.
//
// The serial reader: a ByteSource (plain file, bzip2 decompressor, std::istream, or
// text already in memory) fills a 1 MiB
// chunk buffer; a Tokenizer splits it into whitespace-separated tokens (tokens may
// straddle refills), counting '\n' for line numbers; numbers are parsed in place with
// std::from_chars, with a slower path only for unusual or bad tokens. The scene is built
// in a local and moved into the caller's only on success.
// Allocation is bounded by what the input can hold: when its size is known (a plain file,
// a memory buffer) at most what it can hold is reserved, and a header whose counts need
// several times more bytes than that is an error before anything is allocated; otherwise (bzip2, streams) at most what the compressed size or a
// small default suggests is reserved up front, and storage grows with the data read, so a
// header that lies about its sizes fails at truncation instead of allocating gigabytes.
//
// Error messages have the shape
//   "<name>:<line>: expected <what>, found '<token>'"
//   "<name>:<line>: expected <what>, file ends after <count>"
// where <line> is the line of the offending token (or of the last token for truncation).
// bzip2 and read errors have no line: "<name>: corrupt bzip2 data (...)".
#include "io/bal.h"

#include <bzlib.h>
#include <omp.h>
#include <string.h>  // memrchr
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "io/bal_internal.h"
#include "io/base/atomic_file.h"
#include "io/base/file_bytes.h"
#include "io/base/input_file.h"
#include "io/base/timer.h"
#include "io/bz2_cuda.h"
#include "io/bz2_parallel.h"

namespace tiepoint {
namespace {

// ---------------------------------------------------------------------------------------
// Limits.

using bal_internal::IsSpace;
using bal_internal::kMaxCameras;
using bal_internal::kMaxObservations;
using bal_internal::kMaxPoints;
using bal_internal::kMaxTokenLength;
using bal_internal::NumberKind;
using bal_internal::ParseDouble;
using bal_internal::ParseInt;
using bal_internal::TextPiece;

constexpr size_t kMaxReserve = size_t{16} << 20;      // elements reserved before reading
constexpr size_t kChunkSize = size_t{1} << 20;        // bytes per read from a source
// Reserve guesses where the input's size is not known: a stream reserves for at most
// kUnknownSizeReserveBytes of text (and reads that much at a time), a bzip2 file for kBz2RatioGuess times its size (BAL
// files compress 3-4x; a larger ratio just means the vectors grow as they are read).
constexpr int64_t kUnknownSizeReserveBytes = int64_t{64} << 10;
constexpr int64_t kBz2RatioGuess = 16;

constexpr const char* kHeaderShape = "'<num_cameras> <num_points> <num_observations>'";
constexpr const char* kCameraParamNames[kCameraParams] = {
    "rotation r0",    "rotation r1",    "rotation r2", "translation t0", "translation t1",
    "translation t2", "focal length f", "radial k1",   "radial k2"};
constexpr const char* kPointCoordNames[kPointParams] = {"X", "Y", "Z"};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         std::string_view(s).substr(s.size() - suffix.size()) == suffix;
}

// A token as it should appear in a message: at most 40 characters, non-printable
// bytes escaped (binary garbage must not mangle the terminal).
std::string Quote(std::string_view token) {
  constexpr size_t kShown = 40;
  std::string out;
  const size_t n = std::min(token.size(), kShown);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  if (token.size() > kShown) out += "...";
  return out;
}

// ---------------------------------------------------------------------------------------
// Byte sources.

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `n` bytes into `out`. Sets *got (0 only at end of data). A non-OK status
  // means the data cannot be read further.
  virtual Status Read(char* out, size_t n, size_t* got) = 0;
  // The number of bytes the source holds when known exactly (plain file, memory), else -1.
  virtual int64_t ExactSize() const { return -1; }
  // A guess of the bytes it holds, for reserving storage (-1: no idea).
  virtual int64_t SizeGuess() const { return ExactSize(); }
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

Status OpenForReading(const std::string& path, FilePtr* file) {
  errno = 0;
  file->reset(std::fopen(path.c_str(), "rb"));
  if (!*file) {
    return Status::IoError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  }
  return Status::Ok();
}

// fread with the error check every caller needs.
Status ReadFileChunk(std::FILE* f, const std::string& name, char* out, size_t n, size_t* got) {
  errno = 0;
  *got = std::fread(out, 1, n, f);
  if (*got < n && std::ferror(f)) {
    const int err = errno;
    return Status::IoError(name + ": read error (" +
                           (err != 0 ? std::strerror(err) : "unknown error") + ")");
  }
  return Status::Ok();
}

class FileSource : public ByteSource {
 public:
  FileSource(FilePtr file, std::string name) : file_(std::move(file)), name_(std::move(name)) {
    struct stat st;
    if (::fstat(::fileno(file_.get()), &st) == 0 && S_ISREG(st.st_mode)) size_ = st.st_size;
  }
  Status Read(char* out, size_t n, size_t* got) override {
    return ReadFileChunk(file_.get(), name_, out, n, got);
  }
  int64_t ExactSize() const override { return size_; }

 private:
  FilePtr file_;
  std::string name_;
  int64_t size_ = -1;  // regular files only (not pipes or devices)
};

class MemorySource : public ByteSource {
 public:
  // `exact_size`: what ExactSize() reports (the file's size, or -1 where the bytes came
  // from a pipe, so that messages and checks are those of the original source).
  MemorySource(const char* data, size_t size, int64_t exact_size)
      : data_(data), size_(size), exact_size_(exact_size) {}
  MemorySource(const char* data, size_t size)
      : MemorySource(data, size, static_cast<int64_t>(size)) {}
  Status Read(char* out, size_t n, size_t* got) override {
    *got = std::min(n, size_ - pos_);
    if (*got > 0) std::memcpy(out, data_ + pos_, *got);
    pos_ += *got;
    return Status::Ok();
  }
  int64_t ExactSize() const override { return exact_size_; }

 private:
  const char* data_;
  size_t size_;
  int64_t exact_size_;
  size_t pos_ = 0;
};

// Decoded text held as pieces (the blocks of a parallel bzip2 decode), read in order;
// it stands in for the bzip2 stream it came from (size unknown, as Bz2Source's).
class PiecesSource : public ByteSource {
 public:
  PiecesSource(const std::vector<TextPiece>& pieces, int64_t size_guess)
      : pieces_(pieces), size_guess_(size_guess) {}
  Status Read(char* out, size_t n, size_t* got) override {
    *got = 0;
    while (*got < n && piece_ < pieces_.size()) {
      const TextPiece& p = pieces_[piece_];
      const size_t take = std::min(n - *got, p.size - pos_);
      if (take > 0) std::memcpy(out + *got, p.data + pos_, take);
      *got += take;
      pos_ += take;
      if (pos_ == p.size) {
        ++piece_;
        pos_ = 0;
      }
    }
    return Status::Ok();
  }
  int64_t SizeGuess() const override { return size_guess_; }

 private:
  const std::vector<TextPiece>& pieces_;
  int64_t size_guess_;
  size_t piece_ = 0;
  size_t pos_ = 0;
};

class IstreamSource : public ByteSource {
 public:
  IstreamSource(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}
  Status Read(char* out, size_t n, size_t* got) override {
    *got = 0;
    if (!in_.good()) {
      if (in_.bad()) return Status::IoError(name_ + ": read error");
      return Status::Ok();  // eof (or fail before we started: nothing to read)
    }
    in_.read(out, static_cast<std::streamsize>(n));
    *got = static_cast<size_t>(in_.gcount());
    if (in_.bad()) return Status::IoError(name_ + ": read error");
    return Status::Ok();
  }

 private:
  std::istream& in_;
  std::string name_;
};

// Streams bzip2 data (read from `compressed`) through libbz2's low-level API.
// Concatenated bzip2 streams (as written by pbzip2 or `cat a.bz2 b.bz2`) are decoded one
// after the other.
class Bz2Source : public ByteSource {
 public:
  Bz2Source(std::unique_ptr<ByteSource> compressed, std::string name)
      : compressed_(std::move(compressed)),
        name_(std::move(name)),
        in_size_(compressed_->ExactSize() >= 0 &&
                         compressed_->ExactSize() < static_cast<int64_t>(kChunkSize)
                     ? static_cast<size_t>(compressed_->ExactSize()) + 1
                     : kChunkSize),
        in_(new char[in_size_]) {
    std::memset(&strm_, 0, sizeof(strm_));
  }
  ~Bz2Source() override {
    if (stream_open_) BZ2_bzDecompressEnd(&strm_);
  }

  Status Read(char* out, size_t n, size_t* got) override {
    *got = 0;
    strm_.next_out = out;
    strm_.avail_out = static_cast<unsigned int>(n);
    while (strm_.avail_out > 0) {
      if (strm_.avail_in == 0 && !input_eof_) {
        size_t read = 0;
        TIEPOINT_RETURN_IF_ERROR(compressed_->Read(in_.get(), in_size_, &read));
        if (read == 0) input_eof_ = true;
        strm_.next_in = in_.get();
        strm_.avail_in = static_cast<unsigned int>(read);
      }
      if (!stream_open_) {
        if (strm_.avail_in == 0 && input_eof_) break;  // clean end after a complete stream
        const int rc = BZ2_bzDecompressInit(&strm_, /*verbosity=*/0, /*small=*/0);
        if (rc != BZ_OK) {
          return rc == BZ_MEM_ERROR
                     ? Status::OutOfMemory(name_ + ": out of memory starting bzip2 decoder")
                     : Status::Internal(name_ + ": BZ2_bzDecompressInit failed (" +
                                        std::to_string(rc) + ")");
        }
        stream_open_ = true;
        ++streams_started_;
      }
      const unsigned int avail_out_before = strm_.avail_out;
      const unsigned int avail_in_before = strm_.avail_in;
      const int rc = BZ2_bzDecompress(&strm_);
      if (rc == BZ_STREAM_END) {
        BZ2_bzDecompressEnd(&strm_);
        stream_open_ = false;
        continue;  // more input means another concatenated stream
      }
      if (rc != BZ_OK) return DecodeError(rc);
      if (input_eof_ && strm_.avail_in == 0 && strm_.avail_out == avail_out_before &&
          avail_in_before == 0) {
        return Status::InvalidInput(name_ +
                                    ": bzip2 data ends unexpectedly (the file is truncated)");
      }
    }
    *got = n - strm_.avail_out;
    return Status::Ok();
  }
  int64_t SizeGuess() const override {
    const int64_t compressed = compressed_->ExactSize();
    return compressed < 0 ? -1 : compressed * kBz2RatioGuess;
  }

 private:
  Status DecodeError(int rc) const {
    switch (rc) {
      case BZ_DATA_ERROR_MAGIC:
        if (streams_started_ > 1) {
          return Status::InvalidInput(name_ + ": data after the end of bzip2 stream " +
                                      std::to_string(streams_started_ - 1) +
                                      " is not bzip2 (trailing garbage)");
        }
        return Status::InvalidInput(name_ + ": not a bzip2 file (bad magic bytes)");
      case BZ_DATA_ERROR:
        return Status::InvalidInput(name_ +
                                    ": corrupt bzip2 data (checksum or format error)");
      case BZ_MEM_ERROR:
        return Status::OutOfMemory(name_ + ": out of memory in bzip2 decoder");
      default:
        return Status::Internal(name_ + ": BZ2_bzDecompress failed (" + std::to_string(rc) +
                                ")");
    }
  }

  std::unique_ptr<ByteSource> compressed_;
  std::string name_;
  size_t in_size_;  // bytes per read of compressed data
  std::unique_ptr<char[]> in_;
  bz_stream strm_;
  bool stream_open_ = false;
  bool input_eof_ = false;
  int streams_started_ = 0;
};

// ---------------------------------------------------------------------------------------
// Value parsing (IsSpace, ParseInt, ParseDouble: bal_internal.h) and the tokenizer.

bool LooksLikeNumber(std::string_view token) {
  double v;
  return ParseDouble(token, &v) != NumberKind::kNotNumber;
}

// Splits the byte stream into whitespace-separated tokens. The buffer always ends in
// whitespace up to `limit_` (the byte after the last whitespace read so far, or the end
// of data at EOF), so every token that starts before `limit_` is complete in memory:
// numbers are parsed in place without first scanning for the token's end. The bytes
// after `limit_` (a token cut by the chunk boundary) are moved to the front on refill.
class Tokenizer {
 public:
  Tokenizer(ByteSource* source, const std::string& name)
      : source_(source),
        name_(name),
        chunk_(ChunkFor(*source)),
        buf_(new char[chunk_ + kMaxTokenLength + 1]) {}

  // The next token, valid until the following call. Returns false at end of data or on a
  // read error; status() tells which.
  bool Next(std::string_view* token) {
    if (!SkipSpace()) return false;
    *token = ScanToken();
    return true;
  }

  // The next token parsed as a double: *kind says whether it is a finite number; *token
  // is the token either way. Returns false like Next().
  bool NextDouble(double* value, NumberKind* kind, std::string_view* token) {
    if (!SkipSpace()) return false;
    const char* const start = buf_.get() + pos_;
    const char* const limit = buf_.get() + limit_;
    const auto [ptr, ec] = std::from_chars(start, limit, *value);
    if (ec == std::errc() && ptr != start && (ptr == limit || IsSpace(*ptr)) &&
        std::isfinite(*value)) {
      pos_ = static_cast<size_t>(ptr - buf_.get());
      *token = std::string_view(start, static_cast<size_t>(ptr - start));
      *kind = NumberKind::kOk;
      return true;
    }
    *token = ScanToken();  // the slow path sorts out '+', overflow, underflow, garbage
    *kind = ParseDouble(*token, value);
    return true;
  }

  // The next token parsed as an integer; *ok says whether it is one.
  bool NextInt(int64_t* value, bool* ok, std::string_view* token) {
    if (!SkipSpace()) return false;
    const char* const start = buf_.get() + pos_;
    const char* const limit = buf_.get() + limit_;
    const auto [ptr, ec] = std::from_chars(start, limit, *value);
    if (ec == std::errc() && ptr != start && (ptr == limit || IsSpace(*ptr))) {
      pos_ = static_cast<size_t>(ptr - buf_.get());
      *token = std::string_view(start, static_cast<size_t>(ptr - start));
      *ok = true;
      return true;
    }
    *token = ScanToken();
    *ok = ParseInt(*token, value);
    return true;
  }

  const Status& status() const { return status_; }
  const ByteSource& source() const { return *source_; }
  // Line of the last token returned (1 before any token).
  int64_t line() const { return token_line_; }
  std::string Where() const { return name_ + ":" + std::to_string(line()); }

 private:
  // Skips whitespace (counting lines), refilling as needed. On true, pos_ < limit_ is the
  // start of a token and token_line_ its line.
  bool SkipSpace() {
    for (;;) {
      // Local copies: members would be reloaded after every store through char*.
      const char* const buf = buf_.get();
      size_t pos = pos_;
      const size_t limit = limit_;
      int64_t line = line_;
      while (pos < limit) {
        const char c = buf[pos];
        if (!IsSpace(c)) break;
        line += (c == '\n');
        ++pos;
      }
      pos_ = pos;
      line_ = line;
      if (pos < limit) break;
      if (!Refill()) return false;
    }
    token_line_ = line_;
    return true;
  }

  // The token at pos_ (known to end before limit_ or at the end of data).
  std::string_view ScanToken() {
    const char* const buf = buf_.get();
    const size_t start = pos_;
    size_t pos = pos_;
    const size_t limit = limit_;
    while (pos < limit && !IsSpace(buf[pos])) ++pos;
    pos_ = pos;
    return std::string_view(buf + start, pos - start);
  }

  // Called with pos_ == limit_: keeps the partial token buf_[limit_, end_), reads more
  // data and recomputes limit_. Returns false at end of data (nothing left) or on error.
  bool Refill() {
    if (!status_.ok()) return false;
    for (;;) {
      if (eof_) return false;
      const size_t keep = end_ - limit_;
      if (keep > 0 && limit_ > 0) std::memmove(buf_.get(), buf_.get() + limit_, keep);
      pos_ = 0;
      limit_ = 0;
      end_ = keep;
      if (keep > kMaxTokenLength) {
        token_line_ = line_;
        status_ = Status::InvalidInput(
            Where() + ": expected a value, found a token longer than " +
            std::to_string(kMaxTokenLength) + " characters starting '" +
            Quote(std::string_view(buf_.get(), keep)) + "'");
        return false;
      }
      size_t got = 0;
      Status s = source_->Read(buf_.get() + end_, chunk_, &got);
      if (!s.ok()) {
        status_ = std::move(s);
        return false;
      }
      if (got == 0) {
        eof_ = true;
        limit_ = end_;  // the kept bytes, if any, are the last token
        return end_ > 0;
      }
      end_ += got;
      size_t last = end_;
      while (last > 0 && !IsSpace(buf_[last - 1])) --last;
      limit_ = last;
      if (limit_ > 0) return true;
      // No whitespace yet: the whole buffer is one token; read more.
    }
  }

  // A small input (a file of a few KB, a memory buffer) needs no 1 MiB buffer; a stream
  // of unknown size is read 64 KiB at a time.
  static size_t ChunkFor(const ByteSource& source) {
    int64_t size = source.SizeGuess();
    if (size < 0) size = kUnknownSizeReserveBytes;
    if (size >= static_cast<int64_t>(kChunkSize)) return kChunkSize;
    return static_cast<size_t>(size) + 1;
  }

  ByteSource* source_;
  const std::string& name_;
  const size_t chunk_;  // bytes per read
  std::unique_ptr<char[]> buf_;
  size_t pos_ = 0;    // next byte to look at
  size_t limit_ = 0;  // tokens starting before this are complete
  size_t end_ = 0;    // end of the bytes read
  bool eof_ = false;
  Status status_;
  int64_t line_ = 1;
  int64_t token_line_ = 1;
};

// ---------------------------------------------------------------------------------------
// The reader.

class BalReader {
 public:
  BalReader(ByteSource* source, const std::string& name)
      : name_(name), tok_(source, name_) {}

  Status Read(Scene* out) {
    Scene scene;
    TIEPOINT_RETURN_IF_ERROR(ReadHeader());
    TIEPOINT_RETURN_IF_ERROR(CheckHeaderAgainstSize());
    const int64_t obs = Reservable(num_obs_, 8);  // "c p x y\n": 8 bytes at least
    scene.obs_camera.reserve(static_cast<size_t>(obs));
    scene.obs_point.reserve(static_cast<size_t>(obs));
    scene.obs_xy.reserve(static_cast<size_t>(2 * obs));
    TIEPOINT_RETURN_IF_ERROR(ReadObservations(&scene));
    TIEPOINT_RETURN_IF_ERROR(ReadCameras(&scene));
    TIEPOINT_RETURN_IF_ERROR(ReadPoints(&scene));
    TIEPOINT_RETURN_IF_ERROR(ExpectEnd());
    *out = std::move(scene);
    return Status::Ok();
  }

 private:
  // A non-OK status from the tokenizer (read or bzip2 error) wins over "file ends".
  Status EndOfData(const std::string& expected, const std::string& after) {
    if (!tok_.status().ok()) return tok_.status();
    return Status::InvalidInput(tok_.Where() + ": expected " + expected + ", file ends after " +
                                after);
  }
  Status Found(const std::string& expected, std::string_view token,
               const std::string& note = "") {
    return Status::InvalidInput(tok_.Where() + ": expected " + expected + ", found '" +
                                Quote(token) + "'" + note);
  }

  Status ReadHeaderCount(const char* what, int64_t limit, int64_t* value, int index,
                         int64_t header_line) {
    std::string_view t;
    if (!tok_.Next(&t)) {
      if (!tok_.status().ok()) return tok_.status();
      if (index == 0) {
        return Status::InvalidInput(name_ + ":1: expected header " + kHeaderShape +
                                    ", found an empty file");
      }
      return Status::InvalidInput(tok_.Where() + ": expected header " + kHeaderShape +
                                  ", file ends after " + std::to_string(index) +
                                  (index == 1 ? " number" : " numbers"));
    }
    if (index > 0 && tok_.line() != header_line) {
      return Status::InvalidInput(name_ + ":" + std::to_string(header_line) +
                                  ": expected header " + kHeaderShape +
                                  " on one line, found only " + std::to_string(index) +
                                  (index == 1 ? " number" : " numbers"));
    }
    const std::string expected = std::string("integer number of ") + what + " in header";
    if (!ParseInt(t, value)) {
      std::string note;
      if (t.substr(0, 3) == "BZh") note = " (the file looks bzip2-compressed; name it *.bz2)";
      return Found(expected, t, note);
    }
    if (*value < 0) return Found(std::string("non-negative number of ") + what + " in header", t);
    if (*value > limit) {
      return Found("at most " + std::to_string(limit) + " " + what +
                       " in header (is the header corrupt?)",
                   t);
    }
    return Status::Ok();
  }

  Status ReadHeader() {
    TIEPOINT_RETURN_IF_ERROR(ReadHeaderCount("cameras", kMaxCameras, &num_cameras_, 0, 1));
    const int64_t header_line = tok_.line();
    TIEPOINT_RETURN_IF_ERROR(
        ReadHeaderCount("points", kMaxPoints, &num_points_, 1, header_line));
    TIEPOINT_RETURN_IF_ERROR(
        ReadHeaderCount("observations", kMaxObservations, &num_obs_, 2, header_line));
    // Every observation pairs a camera with a point, each pair at most once.
    const int64_t max_obs = num_cameras_ * num_points_;  // <= 1e16, no overflow
    if (num_obs_ > max_obs) {
      return Status::InvalidInput(
          tok_.Where() + ": expected at most " + std::to_string(num_cameras_) + "*" +
          std::to_string(num_points_) + "=" + std::to_string(max_obs) +
          " observations in header (one per camera and point), found '" +
          std::to_string(num_obs_) + "'");
    }
    return Status::Ok();
  }

  // Every value is a token of at least one byte followed by a whitespace byte (but the
  // last), so the header's counts need at least 2 T - 1 bytes for T tokens. Where the
  // size is known, a header that needs over kHeaderSlack times what the file has is an
  // error before anything is allocated (a corrupt header, not a truncated file: a file
  // cut short keeps the precise message of where its data ends). Either way the
  // storage reserved up front is bounded by the file's size (Reservable).
  static constexpr int64_t kHeaderSlack = 4;
  Status CheckHeaderAgainstSize() {
    const int64_t size = tok_.source().ExactSize();
    if (size < 0) return Status::Ok();
    const int64_t tokens =
        3 + 4 * num_obs_ + kCameraParams * num_cameras_ + kPointParams * num_points_;
    const int64_t needed = 2 * tokens - 1;
    if (needed <= kHeaderSlack * size) return Status::Ok();
    return Status::InvalidInput(
        name_ + ":1: the header promises " + std::to_string(num_cameras_) + " cameras, " +
        std::to_string(num_points_) + " points and " + std::to_string(num_obs_) +
        " observations, which take at least " + std::to_string(needed) +
        " bytes, but the file has " + std::to_string(size) +
        " (truncated file or corrupt header?)");
  }

  // How many of `count` elements to reserve up front, each taking at least
  // `min_bytes` bytes of input: never more than the input can hold (or, where its size is
  // unknown, than a guess of it), nor more than kMaxReserve.
  int64_t Reservable(int64_t count, int64_t min_bytes) const {
    int64_t guess = tok_.source().SizeGuess();
    if (guess < 0) guess = kUnknownSizeReserveBytes;
    return std::min({count, static_cast<int64_t>(kMaxReserve), guess / min_bytes + 1});
  }

  std::string ObsLabel(int64_t i) const {
    return "observation " + std::to_string(i + 1) + " of " + std::to_string(num_obs_);
  }

  Status BadIndex(const char* what, int64_t count, int64_t i, std::string_view t) {
    int64_t v;
    if (!ParseInt(t, &v)) {
      std::string note;
      if (LooksLikeNumber(t) && std::string_view(what) == "camera") {
        // The usual cause: fewer observation lines than the header says, so the reader
        // has run into the camera parameters.
        note = " (the header says " + std::to_string(num_obs_) +
               " observations; does the file list fewer?)";
      }
      return Found(std::string("integer ") + what + " index for " + ObsLabel(i), t, note);
    }
    return Found(std::string(what) + " index in [0, " + std::to_string(count) + ") for " +
                     ObsLabel(i),
                 t);
  }

  // Error for observation i when its value number `values_read` (0-based) is missing
  // (end of data) or sits on another line than the observation's first value.
  Status ObservationShapeError(int64_t i, int values_read, bool at_end, int64_t first_line) {
    if (at_end) {
      std::string after = std::to_string(i);
      if (values_read > 0) after += " (" + ObsLabel(i) + " is incomplete)";
      return EndOfData(std::to_string(num_obs_) + " observations", after);
    }
    return Status::InvalidInput(name_ + ":" + std::to_string(first_line) +
                                ": expected 4 values '<camera> <point> <x> <y>' on one line for " +
                                ObsLabel(i) + ", found " + std::to_string(values_read));
  }

  Status ReadObservations(Scene* scene) {
    std::string_view t;
    for (int64_t i = 0; i < num_obs_; ++i) {
      int64_t cam, pt;
      bool ok;
      if (!tok_.NextInt(&cam, &ok, &t)) return ObservationShapeError(i, 0, true, 0);
      const int64_t line = tok_.line();
      if (!ok || cam < 0 || cam >= num_cameras_) return BadIndex("camera", num_cameras_, i, t);

      if (!tok_.NextInt(&pt, &ok, &t)) return ObservationShapeError(i, 1, true, line);
      if (tok_.line() != line) return ObservationShapeError(i, 1, false, line);
      if (!ok || pt < 0 || pt >= num_points_) return BadIndex("point", num_points_, i, t);

      double xy[2];
      for (int k = 0; k < 2; ++k) {
        NumberKind kind;
        if (!tok_.NextDouble(&xy[k], &kind, &t)) {
          return ObservationShapeError(i, 2 + k, true, line);
        }
        if (tok_.line() != line) return ObservationShapeError(i, 2 + k, false, line);
        if (kind != NumberKind::kOk) {  // labels are built only on error
          return Value(t, kind, std::string(k == 0 ? "x" : "y") + " of " + ObsLabel(i));
        }
      }
      scene->obs_camera.push_back(static_cast<int32_t>(cam));
      scene->obs_point.push_back(static_cast<int32_t>(pt));
      scene->obs_xy.push_back(xy[0]);
      scene->obs_xy.push_back(xy[1]);
    }
    return Status::Ok();
  }

  Status Value(std::string_view t, NumberKind kind, const std::string& what) {
    switch (kind) {
      case NumberKind::kOk: return Status::Ok();
      case NumberKind::kNotNumber: return Found("number for " + what, t);
      case NumberKind::kNotFinite: return Found("finite number for " + what, t);
      case NumberKind::kOutOfRange:
        return Found("finite number for " + what, t, " (out of double range)");
    }
    return Status::Internal("unreachable");
  }

  Status ReadCameras(Scene* scene) {
    const int64_t total = kCameraParams * num_cameras_;
    scene->cameras.reserve(static_cast<size_t>(Reservable(total, 2)));
    std::string_view t;
    for (int64_t k = 0; k < total; ++k) {
      double v;
      NumberKind kind;
      if (!tok_.NextDouble(&v, &kind, &t)) {
        return EndOfData(std::to_string(kCameraParams) + "*" + std::to_string(num_cameras_) +
                             "=" + std::to_string(total) + " camera parameters",
                         std::to_string(k));
      }
      if (kind != NumberKind::kOk) {
        const int64_t cam = k / kCameraParams;
        const int p = static_cast<int>(k % kCameraParams);
        return Value(t, kind,
                     "camera " + std::to_string(cam) + " parameter " + std::to_string(p + 1) +
                         " of " + std::to_string(kCameraParams) + " (" + kCameraParamNames[p] +
                         ")");
      }
      scene->cameras.push_back(v);
    }
    return Status::Ok();
  }

  Status ReadPoints(Scene* scene) {
    const int64_t total = kPointParams * num_points_;
    scene->points.reserve(static_cast<size_t>(Reservable(total, 2)));
    std::string_view t;
    for (int64_t k = 0; k < total; ++k) {
      double v;
      NumberKind kind;
      if (!tok_.NextDouble(&v, &kind, &t)) {
        return EndOfData(std::to_string(kPointParams) + "*" + std::to_string(num_points_) +
                             "=" + std::to_string(total) + " point coordinates",
                         std::to_string(k));
      }
      if (kind != NumberKind::kOk) {
        return Value(t, kind,
                     "point " + std::to_string(k / kPointParams) + " coordinate " +
                         kPointCoordNames[k % kPointParams]);
      }
      scene->points.push_back(v);
    }
    return Status::Ok();
  }

  Status ExpectEnd() {
    std::string_view t;
    if (tok_.Next(&t)) {
      return Found("end of file after " + std::to_string(kPointParams) + "*" +
                       std::to_string(num_points_) + "=" +
                       std::to_string(kPointParams * num_points_) + " point coordinates",
                   t, " (trailing data: are the header's counts too small?)");
    }
    return tok_.status();  // OK at a clean end; a late bzip2/read error otherwise
  }

  const std::string name_;
  Tokenizer tok_;
  int64_t num_cameras_ = 0;
  int64_t num_points_ = 0;
  int64_t num_obs_ = 0;
};

Status ReadFromSource(ByteSource* source, const std::string& name, Scene* scene) {
  if (scene == nullptr) return Status::Internal("ReadBal: scene is null");
  try {
    BalReader reader(source, name);
    return reader.Read(scene);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(name + ": out of memory while reading");
  } catch (const std::length_error&) {
    return Status::OutOfMemory(name + ": out of memory while reading");
  }
}

// ---------------------------------------------------------------------------------------
// Parallel reading (bal_parallel.cc parses, bz2_parallel.cc decompresses); the serial
// reader above runs on the same bytes whenever they decline, so its messages stand.

int ThreadsFor(const BalReadOptions& options) {
  return options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
}

// The serial streaming reader serves when asked for, and for text on one thread with
// automatic chunks: there it is faster (256 against 206 MB/s on the 16-core device host,
// bench/results/bal-read-h100-20261125.json) and holds no copy of the file. (bzip2 on one
// thread stays on the block decoder: 9% faster there.)
bool UseSerial(const BalReadOptions& options, const std::string& name) {
  return !options.parallel ||
         (ThreadsFor(options) == 1 && options.chunk_bytes == 0 && !EndsWith(name, ".bz2"));
}

// The decoded blocks as pieces that end at line ends: a block's whole lines are used in
// place; the line a block boundary cuts is copied, whole, into a seam of its own (a
// deque: the seams must not move).
std::vector<TextPiece> LinePieces(const std::vector<std::string>& blocks,
                                  std::deque<std::string>* seams) {
  std::vector<TextPiece> pieces;
  pieces.reserve(2 * blocks.size() + 1);
  std::string carry;
  for (const std::string& block : blocks) {
    const char* d = block.data();
    const size_t n = block.size();
    const void* first = std::memchr(d, '\n', n);
    if (first == nullptr) {
      carry.append(d, n);
      continue;
    }
    const size_t after_first = static_cast<size_t>(static_cast<const char*>(first) - d) + 1;
    size_t start = 0;
    if (!carry.empty()) {
      carry.append(d, after_first);
      seams->push_back(std::move(carry));
      carry.clear();
      pieces.push_back({seams->back().data(), seams->back().size()});
      start = after_first;
    }
    const size_t after_last =
        static_cast<size_t>(static_cast<const char*>(memrchr(d, '\n', n)) - d) + 1;
    if (after_last > start) pieces.push_back({d + start, after_last - start});
    carry.assign(d + after_last, n - after_last);
  }
  if (!carry.empty()) {
    seams->push_back(std::move(carry));
    pieces.push_back({seams->back().data(), seams->back().size()});
  }
  return pieces;
}

// Reads BAL (".bz2" by name) from `size` bytes at `data`; `exact_size` is what the
// serial reader's source would report as the input's size (-1 for a pipe).
Status ReadBytesParallel(const char* data, size_t size, int64_t exact_size,
                         const std::string& name, const BalReadOptions& options,
                         Scene* scene, BalReadSummary* summary) {
  if (scene == nullptr) return Status::Internal("ReadBal: scene is null");
  const int threads = ThreadsFor(options);
  summary->threads = threads;
  summary->input_bytes = static_cast<int64_t>(size);
  std::string why;
  try {
    if (EndsWith(name, ".bz2")) {
      Timer timer;
      Bz2ParallelOptions bz2_options;
      bz2_options.num_threads = threads;
      Bz2Decoded decoded;
      bool decoded_ok = false;
      Scene presized;
      // The GPU's fixed cost (0.3-0.5 s: the context, and one block's serial Huffman
      // decode, about 0.2 s on an H100) pays off from about 4.5 MB of bzip2 per host
      // thread (about 12 blocks per thread at 45 ms each on the CPU).
      constexpr size_t kGpuBz2BytesPerThread = size_t{4500} << 10;
      if (options.bz2_on_gpu && size >= kGpuBz2BytesPerThread * static_cast<size_t>(threads)) {
        // While the GPU decodes, one thread decodes the first block with libbz2 and sizes
        // the scene for its header: the parse would otherwise wait for that serial
        // zero-fill (0.8 GB at Final-13682 size). Bounded as the parse bounds it, with
        // the text taken as at most 30 times the compressed size.
        auto size_scene = [&] {
          try {
            std::string prefix;
            if (DecompressBz2Prefix(data, size, size_t{1} << 16, &prefix)) {
              bal_internal::SizeSceneForHeader(prefix, 30 * size, &presized);
            }
          } catch (const std::exception&) {
            presized = Scene();
          }
        };
        std::thread sizer;
        try {
          sizer = std::thread(size_scene);
        } catch (const std::system_error&) {  // no thread: the parse sizes the scene
        }
        Bz2CudaOptions gpu_options;
        gpu_options.num_threads = threads;
        decoded_ok = TryDecompressBz2Cuda(data, size, gpu_options, &decoded, &why);
        if (sizer.joinable()) sizer.join();
        summary->bz2_on_gpu = decoded_ok;
        if (!decoded_ok) summary->gpu_decline_reason = why;
      }
      if (!decoded_ok) decoded_ok = TryDecompressBz2Parallel(data, size, bz2_options, &decoded, &why);
      summary->decompress_seconds = timer.Seconds();
      if (!decoded_ok) {
        summary->fallback_reason = "bzip2: " + why;
        timer.Reset();
        Bz2Source source(std::make_unique<MemorySource>(data, size, exact_size), name);
        const Status s = ReadFromSource(&source, name, scene);
        summary->parse_seconds = timer.Seconds();
        return s;
      }
      summary->text_bytes = static_cast<int64_t>(decoded.size);
      timer.Reset();
      std::deque<std::string> seams;
      const std::vector<TextPiece> pieces = LinePieces(decoded.blocks, &seams);
      const bool parsed = bal_internal::ParseBalText(pieces, threads, options.chunk_bytes,
                                                     scene, &why, &presized);
      summary->parse_seconds = timer.Seconds();
      if (parsed) {
        summary->parallel = true;
        return Status::Ok();
      }
      summary->fallback_reason = "text: " + why;
      presized = Scene();
      PiecesSource source(pieces, static_cast<int64_t>(decoded.size));
      return ReadFromSource(&source, name, scene);
    }
    summary->text_bytes = static_cast<int64_t>(size);
    Timer timer;
    const std::vector<TextPiece> pieces = {{data, size}};
    const bool parsed =
        bal_internal::ParseBalText(pieces, threads, options.chunk_bytes, scene, &why);
    summary->parse_seconds = timer.Seconds();
    if (parsed) {
      summary->parallel = true;
      return Status::Ok();
    }
    summary->fallback_reason = "text: " + why;
    MemorySource source(data, size, exact_size);
    return ReadFromSource(&source, name, scene);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(name + ": out of memory while reading");
  } catch (const std::length_error&) {
    return Status::OutOfMemory(name + ": out of memory while reading");
  }
}

// ---------------------------------------------------------------------------------------
// Writing.

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Status Write(const char* data, size_t n) = 0;
  virtual Status Finish() = 0;
};

// The message of a failed write, with the system's reason where there is one (EFBIG past
// RLIMIT_FSIZE, ENOSPC on a full disk): std::ostream keeps no error code, but errno still
// holds that of the write(2) that failed when the stream is checked right after.
Status WriteFailed(const std::string& name) {
  const int err = errno;
  return Status::IoError(name + ": write failed (" +
                         (err != 0 ? std::string(std::strerror(err)) + "; " : std::string()) +
                         "disk full, file size limit or device error)");
}

class OstreamSink : public ByteSink {
 public:
  OstreamSink(std::ostream& out, std::string name) : out_(out), name_(std::move(name)) {}
  Status Write(const char* data, size_t n) override {
    errno = 0;
    out_.write(data, static_cast<std::streamsize>(n));
    if (!out_) return WriteFailed(name_);
    return Status::Ok();
  }
  Status Finish() override {
    errno = 0;
    out_.flush();
    if (!out_) return WriteFailed(name_);
    return Status::Ok();
  }

 private:
  std::ostream& out_;
  std::string name_;
};

class Bz2Sink : public ByteSink {
 public:
  Bz2Sink(std::ostream& out, std::string name)
      : out_(out), name_(std::move(name)), buf_(new char[kChunkSize]) {
    std::memset(&strm_, 0, sizeof(strm_));
  }
  ~Bz2Sink() override {
    if (open_) BZ2_bzCompressEnd(&strm_);
  }
  Status Init() {
    const int rc = BZ2_bzCompressInit(&strm_, /*blockSize100k=*/9, /*verbosity=*/0,
                                      /*workFactor=*/0);
    if (rc != BZ_OK) {
      return rc == BZ_MEM_ERROR ? Status::OutOfMemory(name_ + ": out of memory in bzip2")
                                : Status::Internal(name_ + ": BZ2_bzCompressInit failed (" +
                                                   std::to_string(rc) + ")");
    }
    open_ = true;
    return Status::Ok();
  }
  Status Write(const char* data, size_t n) override {
    strm_.next_in = const_cast<char*>(data);  // bzlib's API is not const-correct
    strm_.avail_in = static_cast<unsigned int>(n);
    while (strm_.avail_in > 0) {
      TIEPOINT_RETURN_IF_ERROR(Step(BZ_RUN, BZ_RUN_OK));
    }
    return Status::Ok();
  }
  Status Finish() override {
    strm_.next_in = nullptr;
    strm_.avail_in = 0;
    int rc;
    do {
      strm_.next_out = buf_.get();
      strm_.avail_out = static_cast<unsigned int>(kChunkSize);
      rc = BZ2_bzCompress(&strm_, BZ_FINISH);
      if (rc != BZ_FINISH_OK && rc != BZ_STREAM_END) return Failed(rc);
      TIEPOINT_RETURN_IF_ERROR(Flush());
    } while (rc != BZ_STREAM_END);
    BZ2_bzCompressEnd(&strm_);
    open_ = false;
    errno = 0;
    out_.flush();
    if (!out_) return WriteFailed(name_);
    return Status::Ok();
  }

 private:
  Status Step(int action, int ok_rc) {
    strm_.next_out = buf_.get();
    strm_.avail_out = static_cast<unsigned int>(kChunkSize);
    const int rc = BZ2_bzCompress(&strm_, action);
    if (rc != ok_rc) return Failed(rc);
    return Flush();
  }
  Status Flush() {
    const size_t n = kChunkSize - strm_.avail_out;
    if (n > 0) {
      errno = 0;
      out_.write(buf_.get(), static_cast<std::streamsize>(n));
      if (!out_) return WriteFailed(name_);
    }
    return Status::Ok();
  }
  Status Failed(int rc) const {
    return Status::Internal(name_ + ": BZ2_bzCompress failed (" + std::to_string(rc) + ")");
  }

  std::ostream& out_;
  std::string name_;
  std::unique_ptr<char[]> buf_;
  bz_stream strm_;
  bool open_ = false;
};

// Formats into a chunk buffer and hands full chunks to the sink.
class BalFormatter {
 public:
  explicit BalFormatter(ByteSink* sink) : sink_(sink) {}

  Status Write(const Scene& s) {
    // A small scene gets a small buffer (a value takes at most 25 characters).
    const size_t values = s.cameras.size() + s.points.size() + 4 * s.obs_camera.size() + 3;
    chunk_ = std::min(kChunkSize, 26 * values);
    buf_.reset(new char[chunk_ + 256]);  // + one line's worth past a chunk
    Int(s.num_cameras()); Char(' '); Int(s.num_points()); Char(' ');
    Int(s.num_observations()); Char('\n');
    TIEPOINT_RETURN_IF_ERROR(MaybeFlush());
    const int64_t n = s.num_observations();
    for (int64_t i = 0; i < n; ++i) {
      Int(s.obs_camera[i]); Char(' ');
      Int(s.obs_point[i]); Char(' ');
      Double(s.obs_xy[2 * i]); Char(' ');
      Double(s.obs_xy[2 * i + 1]); Char('\n');
      TIEPOINT_RETURN_IF_ERROR(MaybeFlush());
    }
    for (double v : s.cameras) {
      Double(v); Char('\n');
      TIEPOINT_RETURN_IF_ERROR(MaybeFlush());
    }
    for (double v : s.points) {
      Double(v); Char('\n');
      TIEPOINT_RETURN_IF_ERROR(MaybeFlush());
    }
    if (len_ > 0) TIEPOINT_RETURN_IF_ERROR(sink_->Write(buf_.get(), len_));
    len_ = 0;
    return sink_->Finish();
  }

 private:
  void Char(char c) { buf_[len_++] = c; }
  void Int(int64_t v) {
    auto r = std::to_chars(buf_.get() + len_, buf_.get() + len_ + 32, v);
    len_ = static_cast<size_t>(r.ptr - buf_.get());
  }
  // Shortest representation that parses back to the same double.
  void Double(double v) {
    auto r = std::to_chars(buf_.get() + len_, buf_.get() + len_ + 64, v);
    len_ = static_cast<size_t>(r.ptr - buf_.get());
  }
  Status MaybeFlush() {
    if (len_ < chunk_) return Status::Ok();
    Status s = sink_->Write(buf_.get(), len_);
    len_ = 0;
    return s;
  }

  ByteSink* sink_;
  size_t chunk_ = kChunkSize;
  std::unique_ptr<char[]> buf_;
  size_t len_ = 0;
};

// The writer refuses scenes that ReadBal would reject, so a written file always reads back.
Status ValidateForWrite(const Scene& s) {
  const std::string prefix = "cannot write BAL: ";
  if (s.cameras.size() % kCameraParams != 0) {
    return Status::InvalidInput(prefix + "scene has " + std::to_string(s.cameras.size()) +
                                " camera values, not a multiple of 9");
  }
  if (s.points.size() % kPointParams != 0) {
    return Status::InvalidInput(prefix + "scene has " + std::to_string(s.points.size()) +
                                " point values, not a multiple of 3");
  }
  const size_t n = s.obs_camera.size();
  if (s.obs_point.size() != n || s.obs_xy.size() != 2 * n) {
    return Status::InvalidInput(prefix + "observation arrays disagree: " + std::to_string(n) +
                                " cameras, " + std::to_string(s.obs_point.size()) +
                                " points, " + std::to_string(s.obs_xy.size()) +
                                " coordinates (expected 2 per observation)");
  }
  const int nc = s.num_cameras();
  const int np = s.num_points();
  for (size_t i = 0; i < n; ++i) {
    if (s.obs_camera[i] < 0 || s.obs_camera[i] >= nc) {
      return Status::InvalidInput(prefix + "observation " + std::to_string(i) +
                                  " refers to camera " + std::to_string(s.obs_camera[i]) +
                                  " but the scene has " + std::to_string(nc) + " cameras");
    }
    if (s.obs_point[i] < 0 || s.obs_point[i] >= np) {
      return Status::InvalidInput(prefix + "observation " + std::to_string(i) +
                                  " refers to point " + std::to_string(s.obs_point[i]) +
                                  " but the scene has " + std::to_string(np) + " points");
    }
    if (!std::isfinite(s.obs_xy[2 * i]) || !std::isfinite(s.obs_xy[2 * i + 1])) {
      return Status::InvalidInput(prefix + "observation " + std::to_string(i) +
                                  " has a non-finite coordinate");
    }
  }
  for (size_t k = 0; k < s.cameras.size(); ++k) {
    if (!std::isfinite(s.cameras[k])) {
      return Status::InvalidInput(prefix + "camera " + std::to_string(k / kCameraParams) +
                                  " parameter " + std::to_string(k % kCameraParams + 1) +
                                  " (" + kCameraParamNames[k % kCameraParams] +
                                  ") is not finite");
    }
  }
  for (size_t k = 0; k < s.points.size(); ++k) {
    if (!std::isfinite(s.points[k])) {
      return Status::InvalidInput(prefix + "point " + std::to_string(k / kPointParams) +
                                  " coordinate " + kPointCoordNames[k % kPointParams] +
                                  " is not finite");
    }
  }
  return Status::Ok();
}

}  // namespace

Status BalReadOptions::Check() const {
  if (num_threads < 0) {
    return Status::InvalidOptions("BAL reading: num_threads must be >= 0 (0: all), got " +
                                  std::to_string(num_threads));
  }
  return Status::Ok();
}

Status ReadBal(const std::string& path, const BalReadOptions& options, Scene* scene,
               BalReadSummary* summary) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  TIEPOINT_RETURN_IF_ERROR(RefuseDirectory(path, "a BAL file"));
  BalReadSummary local;
  BalReadSummary& sum = summary != nullptr ? *summary : local;
  sum = BalReadSummary();
  Timer total;
  Status s;
  if (UseSerial(options, path)) {
    FilePtr file;
    TIEPOINT_RETURN_IF_ERROR(OpenForReading(path, &file));
    if (EndsWith(path, ".bz2")) {
      Bz2Source source(std::make_unique<FileSource>(std::move(file), path), path);
      sum.input_bytes = source.SizeGuess() / kBz2RatioGuess;
      s = ReadFromSource(&source, path, scene);
    } else {
      FileSource source(std::move(file), path);
      sum.input_bytes = sum.text_bytes = source.ExactSize();
      s = ReadFromSource(&source, path, scene);
    }
    sum.parse_seconds = total.Seconds();
  } else {
    FileBytes bytes;
    TIEPOINT_RETURN_IF_ERROR(ReadFileBytes(path, ThreadsFor(options), &bytes));
    sum.read_seconds = total.Seconds();
    const int64_t exact = bytes.regular ? static_cast<int64_t>(bytes.size) : -1;
    s = ReadBytesParallel(bytes.data.get(), bytes.size, exact, path, options, scene, &sum);
  }
  sum.total_seconds = total.Seconds();
  return s;
}

Status ReadBal(const std::string& path, Scene* scene) {
  return ReadBal(path, BalReadOptions(), scene);
}

Status ReadBalFromMemory(const char* data, size_t size, const std::string& name,
                         const BalReadOptions& options, Scene* scene,
                         BalReadSummary* summary) {
  TIEPOINT_RETURN_IF_ERROR(options.Check());
  BalReadSummary local;
  BalReadSummary& sum = summary != nullptr ? *summary : local;
  sum = BalReadSummary();
  Timer total;
  Status s;
  if (UseSerial(options, name)) {
    sum.input_bytes = static_cast<int64_t>(size);
    if (EndsWith(name, ".bz2")) {
      Bz2Source source(std::make_unique<MemorySource>(data, size), name);
      s = ReadFromSource(&source, name, scene);
    } else {
      sum.text_bytes = static_cast<int64_t>(size);
      MemorySource source(data, size);
      s = ReadFromSource(&source, name, scene);
    }
    sum.parse_seconds = total.Seconds();
  } else {
    s = ReadBytesParallel(data, size, static_cast<int64_t>(size), name, options, scene, &sum);
  }
  sum.total_seconds = total.Seconds();
  return s;
}

Status ReadBalFromMemory(const char* data, size_t size, const std::string& name, Scene* scene) {
  return ReadBalFromMemory(data, size, name, BalReadOptions(), scene);
}

Status ReadBal(std::istream& in, const std::string& name, Scene* scene) {
  IstreamSource source(in, name);
  return ReadFromSource(&source, name, scene);
}

Status WriteBal(const std::string& path, const Scene& scene) {
  TIEPOINT_RETURN_IF_ERROR(ValidateForWrite(scene));
  AtomicFile file(path);
  TIEPOINT_RETURN_IF_ERROR(file.Open());
  try {
    if (EndsWith(path, ".bz2")) {
      Bz2Sink sink(file.stream(), path);
      TIEPOINT_RETURN_IF_ERROR(sink.Init());
      TIEPOINT_RETURN_IF_ERROR(BalFormatter(&sink).Write(scene));
    } else {
      OstreamSink sink(file.stream(), path);
      TIEPOINT_RETURN_IF_ERROR(BalFormatter(&sink).Write(scene));
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(path + ": out of memory while writing");
  }
  return file.Commit();  // the destructor removes the temporary on any early return
}

Status WriteBal(std::ostream& out, const Scene& scene) {
  TIEPOINT_RETURN_IF_ERROR(ValidateForWrite(scene));
  try {
    OstreamSink sink(out, "<stream>");
    return BalFormatter(&sink).Write(scene);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("<stream>: out of memory while writing");
  }
}

}  // namespace tiepoint
