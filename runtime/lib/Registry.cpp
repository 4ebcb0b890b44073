//===- Registry.cpp - The algorithms a communicator can run ------------------===//

#include "coll/runtime/Registry.h"

#include "EmbeddedAlgorithms.h"
#include "ProgramCache.h"
#include "Selection.h"

#include "coll/ir/Check.h"
#include "coll/ir/Mscclpp.h"
#include "coll/ir/Verifier.h"
#include "coll/ir/XML.h"
#include "coll/support/PhaseTimer.h"

#if COLL_RUNTIME_HAVE_LANG
#include "coll/compiler/Compiler.h"
#include "coll/lang/Frontend.h"
#endif

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace coll::rt {

namespace {

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

int32_t highestChannel(const ir::Algorithm &alg) {
  int32_t channel = 0;
  for (const ir::Gpu &gpu : alg.gpus)
    for (const ir::ThreadBlock &tb : gpu.tbs)
      channel = std::max(channel, tb.channel);
  return channel;
}

/// Whether an algorithm's result, races and deadlocks are already proven.
enum class Proof {
  /// Read from a file or synthesized: check it here.
  Unchecked,
  /// Compiled here by the .coll compiler, which ran the same checks on the
  /// IR it produced (docs/COMPILER.md, "Verification").
  ProvenByCompiler,
};

llvm::Expected<std::shared_ptr<const Compiled>> planAlgorithm(ir::Algorithm alg,
                                                              llvm::StringRef origin,
                                                              Proof proof = Proof::Unchecked) {
  ir::DiagnosticList diags(origin.str());
  std::optional<PhaseTimer> timer(std::in_place, "runtime-verify", "verifying the IR (runtime)");
  auto analysis = ir::verify(alg, diags);
  if (!analysis)
    return analysis.takeError();
  // An algorithm that races, deadlocks or computes something else is
  // refused with the check's report rather than run (docs/IR.md, "Checking").
  timer.emplace("runtime-check", "checking the IR (runtime)");
  if (proof == Proof::Unchecked && !ir::check(alg, *analysis, diags))
    return diags.takeErrors();
  timer.emplace("plan", "building the plan");
  auto plan = interp::buildPlan(alg, *analysis, origin);
  if (!plan)
    return plan.takeError();
  timer.emplace("hash", "hashing the IR");
  auto compiled = std::make_shared<Compiled>();
  compiled->hash = ir::hashAlgorithm(alg);
  compiled->maxChannel = highestChannel(alg);
  compiled->alg = std::move(alg);
  compiled->plan = std::move(*plan);
  return std::shared_ptr<const Compiled>(std::move(compiled));
}

/// First error line of an error message (the rest are details).
std::string firstLine(const std::string &text) {
  return llvm::StringRef(text).split('\n').first.str();
}

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

/// The compile cache: (source, parameters) -> algorithm or the reason it
/// does not compile.
struct CacheEntry {
  std::shared_ptr<const Compiled> compiled;
  std::string error;
  /// The error came from tracing or compiling the program (not from
  /// planning its IR): another compilation would give it again.
  bool compileError = false;
  bool fromDisk = false; ///< read from the program cache
};
std::mutex cacheMutex; // also serialises the compiler (ANTLR's shared caches)
/// By (source hash, parameters and variant, rank): rank -1 for programs
/// that hold every rank's plan (compiled here), else the rank whose plan
/// was read from the program cache.
std::map<std::tuple<uint64_t, std::string, int>, CacheEntry> cache;

std::string paramKey(const std::vector<std::pair<std::string, int64_t>> &params) {
  std::string key;
  for (const auto &[name, value] : params)
    key += name + "=" + std::to_string(value) + ";";
  return key;
}

/// The params a program declares, and its header where literals write it.
struct ProgramInfo {
  std::vector<std::string> params;
  std::string error; ///< set when the program does not parse
  /// Its `collective` and its options `name`, `protocol`, `min_bytes` and
  /// `max_bytes` are literals (or absent), so they are known below without
  /// tracing it: a built-in may then be compiled on first use.
  bool literalHeader = false;
  ir::Collective collective = ir::Collective::Custom;
  std::string name;
  std::optional<ir::Protocol> protocol;
  uint64_t minBytes = 0, maxBytes = 0;

  bool declares(llvm::StringRef param) const {
    return std::find(params.begin(), params.end(), param) != params.end();
  }
  /// As the program cache keeps it (inspectCached), one item a line.
  std::string note() const {
    std::string text;
    for (const std::string &p : params)
      text += "param " + p + "\n";
    if (literalHeader) {
      text += "collective " + ir::collectiveName(collective).str() + "\n";
      if (!name.empty())
        text += "name " + name + "\n";
      if (protocol)
        text += "protocol " + ir::protocolName(*protocol).str() + "\n";
      text += "bytes " + std::to_string(minBytes) + " " + std::to_string(maxBytes) + "\n";
    }
    return text;
  }
  /// note() read back; nullopt when the text is not one.
  static std::optional<ProgramInfo> fromNote(llvm::StringRef text) {
    ProgramInfo info;
    llvm::SmallVector<llvm::StringRef, 8> lines;
    text.split(lines, '\n', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef line : lines) {
      auto [key, value] = line.split(' ');
      if (key == "param") {
        info.params.push_back(value.str());
      } else if (key == "collective") {
        auto c = ir::parseCollective(value);
        if (!c)
          return std::nullopt;
        info.collective = *c;
        info.literalHeader = true;
      } else if (key == "name") {
        info.name = value.str();
      } else if (key == "protocol") {
        info.protocol = ir::parseProtocol(value);
        if (!info.protocol)
          return std::nullopt;
      } else if (key == "bytes") {
        auto [lo, hi] = value.split(' ');
        if (lo.getAsInteger(10, info.minBytes) || hi.getAsInteger(10, info.maxBytes))
          return std::nullopt;
      } else {
        return std::nullopt;
      }
    }
    return info;
  }
};

/// A program as the registry compiles it: `protocol` and `name` (where set)
/// replace the program's options of those names.
struct ProgramVariant {
  std::optional<ir::Protocol> protocol;
  std::string name;
};

#if COLL_RUNTIME_HAVE_LANG
/// A program's source, named `origin`, in its own SourceMgr, with an engine
/// whose diagnostics are kept as text.
struct ProgramSource {
  llvm::SourceMgr srcMgr;
  std::string text;
  llvm::raw_string_ostream os{text};
  lang::DiagnosticEngine diags{srcMgr, os};
  unsigned id; ///< the source's buffer in srcMgr

  ProgramSource(llvm::StringRef source, llvm::StringRef origin)
      : id(srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(source, origin),
                                     llvm::SMLoc())) {}

  /// The first line of the diagnostics reported so far.
  std::string firstError() { return firstLine(os.str()); }
};

ProgramInfo inspectProgram(llvm::StringRef source, llvm::StringRef origin) {
  ProgramInfo info;
  ProgramSource src(source, origin);
  auto program = lang::parseProgram(src.id, src.diags);
  if (!program) {
    info.error = src.firstError();
    return info;
  }
  namespace ast = lang::ast;
  bool literal = true, collective = false;
  for (const auto &item : program->items) {
    if (auto *param = llvm::dyn_cast<ast::ParamDecl>(item.get())) {
      info.params.push_back(param->name);
    } else if (auto *decl = llvm::dyn_cast<ast::CollectiveDecl>(item.get())) {
      info.collective = decl->kind;
      collective = true;
    } else if (auto *options = llvm::dyn_cast<ast::OptionDecl>(item.get())) {
      for (const ast::OptionDecl::Item &option : options->items) {
        const ast::Expr *value = option.value.get();
        switch (option.kind) {
        case ast::OptionKind::Name:
          if (auto *text = llvm::dyn_cast_or_null<ast::StringExpr>(value))
            info.name = text->value;
          else
            literal = false;
          break;
        case ast::OptionKind::Protocol:
          if (auto *word = llvm::dyn_cast_or_null<ast::NameExpr>(value))
            info.protocol = ir::parseProtocol(word->name);
          literal = literal && info.protocol;
          break;
        case ast::OptionKind::MinBytes:
        case ast::OptionKind::MaxBytes:
          if (auto *number = llvm::dyn_cast_or_null<ast::IntExpr>(value); number && number->value >= 0)
            (option.kind == ast::OptionKind::MinBytes ? info.minBytes : info.maxBytes) =
                static_cast<uint64_t>(number->value);
          else
            literal = false;
          break;
        default: // threadblocks, instances, fusion: no part of the selection
          break;
        }
      }
    }
  }
  info.literalHeader = literal && collective;
  return info;
}

/// inspectProgram's parameters, kept in the program cache beside the plans:
/// with them and a plan there, a rank's creation parses nothing (parsing
/// the 18 built-in programs was most of it). A program that does not parse
/// is parsed again each time, to report why.
ProgramInfo inspectCached(llvm::StringRef source, llvm::StringRef origin,
                          const ProgramCache *disk, int &parsed) {
  std::string key;
  if (disk && disk->enabled()) {
    static constexpr char what[] = "\0declared parameters and header";
    key = disk->key(source, llvm::StringRef(what, sizeof what - 1));
    if (std::optional<std::string> note = disk->loadNote(key))
      if (std::optional<ProgramInfo> info = ProgramInfo::fromNote(*note))
        return *info;
  }
  ProgramInfo info = inspectProgram(source, origin);
  ++parsed;
  if (!key.empty() && info.error.empty())
    disk->storeNote(key, info.note());
  return info;
}

CacheEntry compileProgram(llvm::StringRef source, llvm::StringRef origin,
                          const std::vector<std::pair<std::string, int64_t>> &params,
                          const ProgramVariant &variant) {
  CacheEntry entry;
  ProgramSource src(source, origin);
  lang::Overrides overrides;
  for (const auto &[name, value] : params)
    overrides.params[name] = lang::ParamValue(value);
  std::optional<PhaseTimer> timer(std::in_place, "trace", "parsing and tracing");
  auto dag = lang::compileToDag(src.id, overrides, src.diags);
  timer.reset();
  if (!dag) {
    entry.error = src.firstError();
    entry.compileError = true;
    return entry;
  }
  if (variant.protocol)
    dag->options.protocol = variant.protocol;
  if (!variant.name.empty())
    dag->options.name = variant.name;
  if (dag->options.name.empty())
    dag->options.name = llvm::sys::path::stem(origin).str();
  compiler::CompileOptions options;
  auto alg = compiler::compile(*dag, options, src.diags);
  if (!alg) {
    entry.error = src.firstError();
    entry.compileError = true;
    return entry;
  }
  auto planned = planAlgorithm(std::move(*alg), origin, Proof::ProvenByCompiler);
  if (!planned) {
    entry.error = firstLine(llvm::toString(planned.takeError()));
    return entry;
  }
  entry.compiled = std::move(*planned);
  return entry;
}
#endif

/// `source` compiled with `params` and `variant`: from this process's
/// cache, else from the program cache `disk` (when there is one), else
/// compiled, and then kept in both.
CacheEntry compileCached(llvm::StringRef source, llvm::StringRef origin,
                         const std::vector<std::pair<std::string, int64_t>> &params,
                         const ProgramVariant &variant, const ProgramCache *disk, int rank) {
#if COLL_RUNTIME_HAVE_LANG
  std::lock_guard<std::mutex> lock(cacheMutex);
  std::string variantKey = variant.name;
  if (variant.protocol)
    variantKey += "@" + ir::protocolName(*variant.protocol).str();
  const uint64_t sourceHash = llvm::hash_value(source);
  const std::string settings = paramKey(params) + variantKey;
  // Every rank's plan serves any rank; a rank's own serves that rank.
  for (int held : {-1, rank}) {
    auto found = cache.find({sourceHash, settings, held});
    if (found != cache.end())
      return found->second;
  }
  std::string diskKey;
  if (disk && disk->enabled()) {
    // The origin names the program in error messages.
    diskKey = disk->key(source, origin.str() + '\0' + settings);
    std::optional<PhaseTimer> timer(std::in_place, "cache-read", "reading the program cache");
    std::optional<ProgramCache::Entry> hit = disk->load(diskKey, rank);
    timer.reset();
    if (hit) {
      // Proven by the compilation that stored it (ProgramCache.h): no IR
      // to verify, no plan to build.
      CacheEntry entry;
      entry.fromDisk = true;
      entry.compileError = !hit->plan;
      entry.error = hit->error;
      if (hit->plan) {
        auto compiled = std::make_shared<Compiled>();
        compiled->plan = std::move(*hit->plan);
        compiled->plan.fileName = origin.str();
        compiled->hash = hit->hash;
        compiled->maxChannel = hit->maxChannel;
        entry.compiled = std::move(compiled);
      }
      cache.emplace(std::make_tuple(sourceHash, settings, entry.compiled ? rank : -1), entry);
      return entry;
    }
  }
  CacheEntry entry = compileProgram(source, origin, params, variant);
  if (!diskKey.empty() && (entry.compiled || entry.compileError)) {
    ProgramCache::Entry stored;
    if (entry.compiled) {
      stored.plan = entry.compiled->plan;
      stored.hash = entry.compiled->hash;
      stored.maxChannel = entry.compiled->maxChannel;
    }
    stored.error = entry.error;
    PhaseTimer timer("cache-write", "writing the program cache");
    disk->store(diskKey, stored);
  }
  cache.emplace(std::make_tuple(sourceHash, settings, -1), entry);
  return entry;
#else
  (void)source;
  (void)origin;
  (void)params;
  (void)variant;
  (void)disk;
  (void)rank;
  CacheEntry entry;
  entry.error = "this build of Coll has no .coll compiler (configured with "
                "COLL_ENABLE_LANG=OFF); use compiled XML";
  return entry;
#endif
}

/// The parameters that fit `program` to `shape`, or why none do.
llvm::Expected<std::vector<std::pair<std::string, int64_t>>>
shapeParams(const std::vector<std::string> &declared, const Shape &shape) {
  auto has = [&](llvm::StringRef name) {
    return std::find(declared.begin(), declared.end(), name) != declared.end();
  };
  std::vector<std::pair<std::string, int64_t>> params;
  if (has("N")) {
    params.emplace_back("N", shape.nranks);
  } else if (has("NODES") && has("GPUS")) {
    if (shape.gpus == 0)
      return fail(llvm::formatv("needs NODES x GPUS ranks, but the communicator's {0} ranks "
                                "are not numbered host by host with the same count per host",
                                shape.nranks));
    params.emplace_back("NODES", shape.nodes);
    params.emplace_back("GPUS", shape.gpus);
  }
  if (has("root"))
    params.emplace_back("root", 0);
  return params;
}

std::vector<std::string> splitList(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  text.split(parts, ':', -1, false);
  std::vector<std::string> out;
  for (llvm::StringRef part : parts) {
    llvm::SmallVector<llvm::StringRef, 4> sub;
    part.split(sub, ',', -1, false);
    for (llvm::StringRef s : sub)
      if (!s.trim().empty())
        out.push_back(s.trim().str());
  }
  return out;
}

} // namespace

bool Registry::compilesPrograms() { return COLL_RUNTIME_HAVE_LANG != 0; }

std::string programCacheFromEnvironment() { return ProgramCache::fromEnvironment(); }

std::string Registry::cacheDirectory() const {
  return disk && disk->enabled() ? disk->directory() : std::string();
}

llvm::Expected<std::shared_ptr<const Compiled>> compileXml(llvm::StringRef text,
                                                           llvm::StringRef origin) {
  ir::DiagnosticList diags(origin.str());
  auto alg = ir::parseAlgorithm(text, diags);
  if (!alg)
    return alg.takeError();
  return planAlgorithm(std::move(*alg), origin);
}

llvm::Expected<std::shared_ptr<const Compiled>> compilePlan(llvm::StringRef text,
                                                            llvm::StringRef origin) {
  ir::DiagnosticList diags(origin.str());
  auto alg = ir::mscclpp::parsePlanAlgorithm(text, diags);
  if (!alg)
    return alg.takeError();
  return planAlgorithm(std::move(*alg), origin);
}

llvm::Expected<Registry> Registry::load(const RegistryOptions &options, const Shape &shape) {
  Registry reg;
  reg.shape = shape;
  reg.rank = options.rank;
  if (!options.cacheDir.empty())
    reg.disk = std::make_shared<const ProgramCache>(options.cacheDir);

  auto addCompiled = [&](std::shared_ptr<const Compiled> compiled, const std::string &origin,
                         bool builtin, bool anyRoot, const std::string &source,
                         std::vector<std::pair<std::string, int64_t>> params) {
    const interp::Plan &plan = compiled->plan;
    if (plan.nranks != shape.nranks) {
      reg.rejected.push_back(
          {plan.name, origin,
           llvm::formatv("written for {0} ranks; the communicator has {1}", plan.nranks,
                         shape.nranks)});
      return;
    }
    if (plan.collective == ir::Collective::Custom) {
      reg.rejected.push_back({plan.name, origin,
                              "a custom collective has no API call to serve"});
      return;
    }
    // Direct steps run in the shared areas of one host's ranks (Direct.cpp);
    // across hosts, peers' memory is not mapped.
    if (compiled->alg.hasDirectSteps() && shape.nodes > 1) {
      reg.rejected.push_back(
          {plan.name, origin,
           llvm::formatv("it has direct steps (put, get, getre, signal, wait), which need every "
                         "rank on one host; the communicator spans {0} hosts",
                         shape.nodes)});
      return;
    }
    LoadedAlgorithm la;
    la.name = plan.name;
    la.origin = origin;
    la.builtin = builtin;
    la.collective = plan.collective;
    la.protocol = plan.protocol;
    la.compiled = std::move(compiled);
    la.anyRoot = anyRoot;
    la.source = source;
    la.params = std::move(params);
    la.minBytes = plan.minBytes;
    la.maxBytes = plan.maxBytes;
    la.root = plan.root;
    reg.algos.push_back(std::move(la));
  };

  auto addProgram = [&](llvm::StringRef source, const std::string &origin, bool builtin,
                        const ProgramVariant &variant = {}) {
    std::string name = variant.name.empty() ? llvm::sys::path::stem(origin).str() : variant.name;
#if COLL_RUNTIME_HAVE_LANG
    ProgramInfo info;
    {
      std::lock_guard<std::mutex> lock(cacheMutex);
      info = inspectCached(source, origin, reg.disk.get(), reg.inspectedHere);
    }
    if (!info.error.empty()) {
      reg.rejected.push_back({name, origin, info.error});
      return;
    }
    auto params = shapeParams(info.params, shape);
    if (!params) {
      reg.rejected.push_back({name, origin, llvm::toString(params.takeError())});
      return;
    }
    // A built-in whose header is known without tracing it, for this shape
    // (N, or NODES and GPUS), and for any root: compiled on first use. The
    // built-ins for windows make the host's shared areas at registration
    // (hasDirectPrograms), so they are compiled now, as are those a tuning
    // rule names, whose errors the user would want at creation.
    const std::string algoName = !variant.name.empty() ? variant.name
                                 : !info.name.empty()  ? info.name
                                                       : llvm::sys::path::stem(origin).str();
    const bool deferrable =
        builtin && options.deferBuiltins && info.literalHeader &&
        info.collective != ir::Collective::Custom &&
        (info.declares("N") || (info.declares("NODES") && info.declares("GPUS"))) &&
        (!ir::collectiveInfo(info.collective).hasRoot || info.declares("root")) &&
        !isWindowOnlyBuiltin(algoName) &&
        std::find(options.namedByRules.begin(), options.namedByRules.end(), algoName) ==
            options.namedByRules.end();
    if (deferrable) {
      LoadedAlgorithm la;
      la.name = algoName;
      la.origin = origin;
      la.builtin = true;
      la.collective = info.collective;
      la.protocol = variant.protocol ? *variant.protocol
                                     : info.protocol.value_or(ir::Protocol::Simple);
      la.anyRoot = info.declares("root");
      la.source = source.str();
      la.params = *params;
      la.protocolOverride = variant.protocol;
      la.minBytes = info.minBytes;
      la.maxBytes = info.maxBytes;
      la.root = ir::collectiveInfo(info.collective).hasRoot ? 0 : -1;
      la.deferred = std::make_shared<DeferredProgram>();
      la.deferred->source = la.source;
      la.deferred->params = *params;
      la.deferred->protocol = variant.protocol;
      la.deferred->variantName = variant.name;
      reg.algos.push_back(std::move(la));
      ++reg.deferredHere;
      return;
    }
    CacheEntry entry = compileCached(source, origin, *params, variant, reg.disk.get(), reg.rank);
    (entry.fromDisk ? reg.fromCache : reg.compiledHere) += 1;
    if (!entry.compiled) {
      reg.rejected.push_back({name, origin,
                              llvm::formatv("does not compile for {0} ranks: {1}", shape.nranks,
                                            entry.error)});
      return;
    }
    bool anyRoot = std::find(info.params.begin(), info.params.end(), "root") != info.params.end();
    const size_t before = reg.algos.size();
    addCompiled(entry.compiled, origin, builtin, anyRoot, anyRoot ? source.str() : "", *params);
    if (reg.algos.size() > before)
      reg.algos.back().protocolOverride = variant.protocol;
#else
    reg.rejected.push_back(
        {name, origin, compileCached(source, origin, {}, variant, reg.disk.get(), reg.rank).error});
#endif
  };

  auto addFile = [&](const std::string &path) -> llvm::Error {
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
    if (!buffer)
      return fail("cannot read the algorithm file " + path + ": " + buffer.getError().message());
    llvm::StringRef ext = llvm::sys::path::extension(path);
    if (ext == ".coll") {
      addProgram((*buffer)->getBuffer(), path, false);
    } else if (ext == ".xml" || ext == ".json") {
      auto compiled = ext == ".xml" ? compileXml((*buffer)->getBuffer(), path)
                                    : compilePlan((*buffer)->getBuffer(), path);
      if (!compiled)
        reg.rejected.push_back({llvm::sys::path::stem(path).str(), path,
                                firstLine(llvm::toString(compiled.takeError()))});
      else
        addCompiled(*compiled, path, false, false, "", {});
    } else {
      return fail("the algorithm file " + path +
                  " is neither .xml (MSCCL), .json (an MSCCL++ execution plan) nor .coll");
    }
    return llvm::Error::success();
  };

  if (!options.algoDir.empty()) {
    std::error_code ec;
    std::vector<std::string> files;
    for (llvm::sys::fs::directory_iterator it(options.algoDir, ec), end; !ec && it != end;
         it.increment(ec)) {
      llvm::StringRef ext = llvm::sys::path::extension(it->path());
      if (ext == ".xml" || ext == ".json" || ext == ".coll")
        files.push_back(it->path());
    }
    if (ec)
      return fail("cannot read COLL_ALGO_DIR " + options.algoDir + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const std::string &file : files)
      if (llvm::Error err = addFile(file))
        return err;
  }
  for (const std::string &file : splitList(options.algoFiles))
    if (llvm::Error err = addFile(file))
      return err;
  if (options.builtin)
    for (size_t i = 0; i < numEmbeddedPrograms; ++i) {
      const EmbeddedProgram &p = embeddedPrograms[i];
      // The direct built-ins serve buffers in windows of one host's ranks
      // (Selection.h): not compiled where they cannot run, nor for more
      // ranks than a host holds in practice (a step per pair of ranks).
      if (isWindowOnlyBuiltin(p.name) && (shape.nodes > 1 || shape.nranks > MaxWindowBuiltinRanks)) {
        reg.rejected.push_back(
            {p.name, std::string("built-in ") + p.file + ".coll",
             shape.nodes > 1
                 ? llvm::formatv("it has direct steps, which need every rank on one host; the "
                                 "communicator spans {0} hosts",
                                 shape.nodes)
                       .str()
                 : llvm::formatv("built in for at most {0} ranks on one host; the communicator "
                                 "has {1}",
                                 MaxWindowBuiltinRanks, shape.nranks)
                       .str()});
        continue;
      }
      if (isTuningOnlyBuiltin(p.name) &&
          std::find(options.namedByRules.begin(), options.namedByRules.end(), p.name) ==
              options.namedByRules.end()) {
        reg.rejected.push_back(
            {p.name, std::string("built-in ") + p.file + ".coll",
             "no built-in rule picks it, and no tuning rule names it (COLL_TUNING_FILE): "
             "not compiled"});
        continue;
      }
      const bool namedByRule =
          std::find(options.namedByRules.begin(), options.namedByRules.end(), p.name) !=
          options.namedByRules.end();
      if (isDeviceOnlyBuiltin(p.name) && !deviceRulesCover(p.name, shape.nranks) && !namedByRule) {
        reg.rejected.push_back(
            {p.name, std::string("built-in ") + p.file + ".coll",
             llvm::formatv("the built-in rules for device calls name it for other rank counts "
                           "than {0}, and no tuning rule names it (COLL_TUNING_FILE): not "
                           "compiled",
                           shape.nranks)
                 .str()});
        continue;
      }
      // Above FirstUseCompileRanks, a device variant compiled at creation
      // (COLL_COMPILE_ON_FIRST_USE=0) would cost every communicator what
      // only device calls use: there, only on first use.
      if (isDeviceOnlyBuiltin(p.name) && !options.deferBuiltins &&
          shape.nranks > FirstUseCompileRanks && !namedByRule) {
        reg.rejected.push_back(
            {p.name, std::string("built-in ") + p.file + ".coll",
             llvm::formatv("a variant for device calls, compiled above {0} ranks only at its "
                           "first use, which COLL_COMPILE_ON_FIRST_USE=0 turns off: not compiled",
                           FirstUseCompileRanks)
                 .str()});
        continue;
      }
      ProgramVariant variant;
      std::string origin = std::string("built-in ") + p.file + ".coll";
      if (p.protocol) {
        variant.protocol = ir::parseProtocol(p.protocol);
        variant.name = p.name;
        origin += std::string(" with protocol ") + p.protocol;
      }
      addProgram(p.source, origin, true, variant);
    }
  return reg;
}

llvm::Error Registry::addSynthesized(const ir::Algorithm &alg, const std::string &origin) {
  if (alg.ngpus() != shape.nranks)
    return fail(llvm::formatv("{0}: synthesized for {1} ranks; the communicator has {2}", alg.name,
                              alg.ngpus(), shape.nranks));
  auto compiled = planAlgorithm(alg, origin);
  if (!compiled)
    return compiled.takeError();
  LoadedAlgorithm la;
  la.name = alg.name;
  la.origin = origin;
  la.collective = alg.collective;
  la.protocol = alg.protocol;
  la.compiled = std::move(*compiled);
  algos.push_back(std::move(la));
  return llvm::Error::success();
}

uint64_t Registry::fingerprint() const {
  llvm::hash_code h = llvm::hash_value(algos.size());
  for (const LoadedAlgorithm &a : algos)
    h = a.deferred ? llvm::hash_combine(h, a.name, llvm::hash_value(a.source), paramKey(a.params),
                                        static_cast<int>(a.protocol), a.anyRoot)
                   : llvm::hash_combine(h, a.name, a.compiled->hash, a.anyRoot);
  return h;
}

int32_t Registry::maxChannel() const {
  int32_t channel = 0;
  for (const LoadedAlgorithm &a : algos)
    // A deferred program is not compiled yet: its channels are promised
    // to stay below the rank count, as every built-in's do (each chunk's
    // flow gets at most a channel per rank); compileDeferred holds it to
    // that.
    channel = std::max(channel, a.deferred ? deferredChannelLimit() : a.compiled->maxChannel);
  return channel;
}

int32_t Registry::deferredChannelLimit() const { return std::max(shape.nranks - 1, 0); }

std::shared_ptr<const Compiled> LoadedAlgorithm::program() const {
  if (compiled || !deferred)
    return compiled;
  std::lock_guard<std::mutex> lock(deferred->mutex);
  return deferred->compiled;
}

std::string LoadedAlgorithm::failure() const {
  if (!deferred || !deferred->settled.load(std::memory_order_acquire))
    return {};
  std::lock_guard<std::mutex> lock(deferred->mutex);
  return deferred->compiled ? std::string() : deferred->error;
}

bool Registry::anyPending() const {
  if (!deferredHere)
    return false;
  return std::any_of(algos.begin(), algos.end(),
                     [](const LoadedAlgorithm &a) { return a.pending(); });
}

void Registry::settle(const LoadedAlgorithm &algo, std::shared_ptr<const Compiled> program,
                      std::string error) {
  if (!algo.deferred)
    return;
  std::lock_guard<std::mutex> lock(algo.deferred->mutex);
  algo.deferred->compiled = std::move(program);
  algo.deferred->error = algo.deferred->compiled ? std::string() : std::move(error);
  algo.deferred->settled.store(true, std::memory_order_release);
}

llvm::Expected<std::shared_ptr<const Compiled>>
Registry::compileDeferred(const LoadedAlgorithm &algo) const {
  if (!algo.deferred) {
    if (!algo.compiled)
      return fail(algo.name + " has no program");
    return algo.compiled;
  }
  const DeferredProgram &d = *algo.deferred;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.settled.load(std::memory_order_relaxed)) {
      if (d.compiled)
        return d.compiled;
      return fail(d.error);
    }
  }
  ProgramVariant variant;
  variant.protocol = d.protocol;
  variant.name = d.variantName;
  std::optional<PhaseTimer> timer(std::in_place, "first-use", "compiling on first use");
  CacheEntry entry = compileCached(d.source, algo.origin, d.params, variant, disk.get(), rank);
  timer.reset();
  if (!entry.compiled)
    return fail(llvm::formatv("does not compile for {0} ranks: {1}", shape.nranks, entry.error));
  const Compiled &c = *entry.compiled;
  const interp::Plan &plan = c.plan;
  // What load() checks of a compiled program, and that the header read
  // without tracing it was the program's.
  if (plan.nranks != shape.nranks)
    return fail(llvm::formatv("written for {0} ranks; the communicator has {1}", plan.nranks,
                              shape.nranks));
  if (plan.collective != algo.collective || plan.protocol != algo.protocol ||
      plan.minBytes != algo.minBytes || plan.maxBytes != algo.maxBytes)
    return fail(llvm::formatv("compiled as a {0} ({1}, sizes {2}-{3}), where its header said a "
                              "{4} ({5}, sizes {6}-{7})",
                              ir::collectiveName(plan.collective), ir::protocolName(plan.protocol),
                              plan.minBytes, plan.maxBytes, ir::collectiveName(algo.collective),
                              ir::protocolName(algo.protocol), algo.minBytes, algo.maxBytes));
  if (!plan.signals.empty() && shape.nodes > 1)
    return fail(llvm::formatv("it has direct steps (put, get, getre, signal, wait), which need "
                              "every rank on one host; the communicator spans {0} hosts",
                              shape.nodes));
  if (c.maxChannel > deferredChannelLimit())
    return fail(llvm::formatv("it uses channel {0}, and the communicator's FIFOs were laid out "
                              "at its creation for channels up to {1} in programs compiled on "
                              "first use",
                              c.maxChannel, deferredChannelLimit()));
  return entry.compiled;
}

llvm::Expected<std::shared_ptr<const Compiled>> Registry::forRoot(const LoadedAlgorithm &algo,
                                                                  int root) const {
  std::shared_ptr<const Compiled> own = algo.program();
  if (!own)
    return fail(algo.pending() ? "it is not compiled yet (compiled on first use)"
                               : algo.failure());
  if (own->plan.root == root || (own->plan.root < 0 && root == 0))
    return own;
  if (!algo.anyRoot)
    return fail(llvm::formatv("its file is for root {0}", std::max(own->plan.root, 0)));
  auto params = algo.params;
  for (auto &p : params)
    if (p.first == "root")
      p.second = root;
  ProgramVariant variant;
  if (algo.protocolOverride) {
    variant.protocol = algo.protocolOverride;
    variant.name = algo.name;
  }
  CacheEntry entry = compileCached(algo.source, algo.origin, params, variant, disk.get(), rank);
  if (!entry.compiled)
    return fail(llvm::formatv("does not compile for root {0}: {1}", root, entry.error));
  return entry.compiled;
}

} // namespace coll::rt
