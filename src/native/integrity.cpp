#include "native/integrity.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace kbv::native {
namespace {

#if defined(__x86_64__)
constexpr unsigned kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr unsigned kGlobDat = R_X86_64_GLOB_DAT;
constexpr bool kKnownArch = true;
#elif defined(__aarch64__)
constexpr unsigned kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr unsigned kGlobDat = R_AARCH64_GLOB_DAT;
constexpr bool kKnownArch = true;
#else
constexpr unsigned kJumpSlot = 0;
constexpr unsigned kGlobDat = 0;
constexpr bool kKnownArch = false;
#endif

constexpr std::size_t kEntryBytes = 16;  // a jump to anywhere takes 12 bytes on x86-64

// Functions every clock in the process goes through, whatever called them.
constexpr const char* kClockFunctions[] = {
    "clock_gettime",
    "gettimeofday",
    "_ZNSt6chrono3_V212steady_clock3nowEv",
    "_ZNSt6chrono3_V212system_clock3nowEv",
};

struct Range {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool holds(std::uintptr_t p, std::size_t n) const { return p >= begin && p + n <= end; }
};

// The first bytes of a function, as they were.
struct Entry {
  std::string name;
  std::uintptr_t address = 0;
  unsigned char bytes[kEntryBytes] = {};
};

// A GOT slot of kbv_native and what it held.
struct Slot {
  std::string name;
  std::uintptr_t address = 0;
  std::uintptr_t value = 0;
  bool quick = false;  // on the CUDA timing path
};

// A span of code kept whole.
struct Code {
  std::string name;
  Range range;
  std::vector<unsigned char> bytes;
};

struct State {
  bool ready = false;
  std::vector<Slot> slots;
  std::vector<Entry> entries;
  std::vector<std::size_t> quick_entries;  // indices into `entries`
  std::vector<Code> code;
  std::vector<std::string> notes;
};

State& Record() {
  static State* const state = new State();  // never destroyed: read until the process ends
  return *state;
}

struct Object {
  std::uintptr_t base = 0;
  const ElfW(Phdr) * phdr = nullptr;
  int phnum = 0;
  std::string name;
};

std::vector<Object> LoadedObjects() {
  std::vector<Object> out;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto* objects = static_cast<std::vector<Object>*>(data);
        objects->push_back({info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum,
                            info->dlpi_name ? info->dlpi_name : ""});
        return 0;
      },
      &out);
  return out;
}

std::vector<Range> ExecutableRanges(const Object& o) {
  std::vector<Range> out;
  for (int i = 0; i < o.phnum; ++i) {
    const auto& p = o.phdr[i];
    if (p.p_type == PT_LOAD && (p.p_flags & PF_X)) {
      out.push_back({o.base + p.p_vaddr, o.base + p.p_vaddr + p.p_memsz});
    }
  }
  return out;
}

bool InCode(const std::vector<Range>& ranges, std::uintptr_t p, std::size_t n) {
  for (const auto& r : ranges) {
    if (r.holds(p, n)) return true;
  }
  return false;
}

// Through /proc/self/mem: past page protections (RELRO, read-only code), as the rewrite was.
bool PutBack(std::uintptr_t address, const void* bytes, std::size_t n) {
  const int fd = ::open("/proc/self/mem", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::pwrite(fd, bytes, n, static_cast<off_t>(address)) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok;
}

void KeepEntry(State& s, const std::vector<Range>& code, const std::string& name,
               std::uintptr_t address, bool quick) {
  if (address == 0 || !InCode(code, address, kEntryBytes)) return;
  for (const auto& e : s.entries) {
    if (e.address == address) return;
  }
  Entry e{name, address, {}};
  std::memcpy(e.bytes, reinterpret_cast<const void*>(address), kEntryBytes);
  if (quick) s.quick_entries.push_back(s.entries.size());
  s.entries.push_back(std::move(e));
}

// The relocations of kbv_native's dynamic section that fill GOT slots, as (slot, name).
std::vector<std::pair<std::uintptr_t, std::string>> GotSlots(const Object& self) {
  std::vector<std::pair<std::uintptr_t, std::string>> out;
  if (!kKnownArch) return out;
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < self.phnum; ++i) {
    if (self.phdr[i].p_type == PT_DYNAMIC) {
      dyn = reinterpret_cast<const ElfW(Dyn)*>(self.base + self.phdr[i].p_vaddr);
    }
  }
  if (dyn == nullptr) return out;
  // glibc relocates these entries in place; a loader that does not leaves offsets.
  auto at = [&](ElfW(Addr) v) { return v < self.base ? self.base + v : v; };
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  std::uintptr_t jmprel = 0, rela = 0;
  std::size_t jmprel_size = 0, rela_size = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(at(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(at(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        jmprel = at(d->d_un.d_ptr);
        break;
      case DT_PLTRELSZ:
        jmprel_size = d->d_un.d_val;
        break;
      case DT_RELA:
        rela = at(d->d_un.d_ptr);
        break;
      case DT_RELASZ:
        rela_size = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return out;
  for (auto [table, bytes] : {std::pair{jmprel, jmprel_size}, std::pair{rela, rela_size}}) {
    if (table == 0) continue;
    const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
    for (std::size_t k = 0; k < bytes / sizeof(ElfW(Rela)); ++k) {
      const unsigned type = ELF64_R_TYPE(r[k].r_info);
      const std::size_t sym = ELF64_R_SYM(r[k].r_info);
      if ((type != kJumpSlot && type != kGlobDat) || sym == 0) continue;
      out.emplace_back(self.base + r[k].r_offset, strtab + symtab[sym].st_name);
    }
  }
  return out;
}

void Check(State& s, bool quick_only, std::vector<std::string>& found) {
  for (const auto& slot : s.slots) {
    if (quick_only && !slot.quick) continue;
    std::uintptr_t now = 0;
    std::memcpy(&now, reinterpret_cast<const void*>(slot.address), sizeof now);
    if (now != slot.value) {
      found.push_back("kbv_native's GOT slot for " + slot.name + " was redirected");
      PutBack(slot.address, &slot.value, sizeof slot.value);
    }
  }
  auto check_entry = [&](const Entry& e) {
    if (std::memcmp(reinterpret_cast<const void*>(e.address), e.bytes, kEntryBytes) != 0) {
      found.push_back("the first bytes of " + e.name + " were rewritten");
      PutBack(e.address, e.bytes, kEntryBytes);
    }
  };
  if (quick_only) {
    for (std::size_t i : s.quick_entries) check_entry(s.entries[i]);
    return;
  }
  for (const auto& e : s.entries) check_entry(e);
  for (const auto& c : s.code) {
    const auto* now = reinterpret_cast<const unsigned char*>(c.range.begin);
    if (std::memcmp(now, c.bytes.data(), c.bytes.size()) != 0) {
      found.push_back(c.name + " was rewritten");
      PutBack(c.range.begin, c.bytes.data(), c.bytes.size());
    }
  }
}

}  // namespace

std::int64_t KernelMonotonicNs() {
  timespec ts{};
#if defined(__x86_64__)
  long ret = 0;
  asm volatile("syscall"
               : "=a"(ret)
               : "0"(static_cast<long>(SYS_clock_gettime)), "D"(static_cast<long>(CLOCK_MONOTONIC)),
                 "S"(&ts)
               : "rcx", "r11", "memory");
  (void)ret;
#elif defined(__aarch64__)
  register long x8 asm("x8") = SYS_clock_gettime;
  register long x0 asm("x0") = CLOCK_MONOTONIC;
  register long x1 asm("x1") = reinterpret_cast<long>(&ts);
  asm volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1) : "memory");
#else
  clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void IntegrityInit() {
  State& s = Record();
  if (s.ready) return;
  s.ready = true;
  const auto objects = LoadedObjects();
  std::vector<Range> code;
  for (const auto& o : objects) {
    for (const auto& r : ExecutableRanges(o)) code.push_back(r);
  }
  const auto self_address = reinterpret_cast<std::uintptr_t>(&IntegrityInit);
  const auto vdso = static_cast<std::uintptr_t>(getauxval(AT_SYSINFO_EHDR));
  for (const auto& o : objects) {
    const auto ranges = ExecutableRanges(o);
    const bool self = InCode(ranges, self_address, 1);
    const bool is_vdso = vdso != 0 && reinterpret_cast<std::uintptr_t>(o.phdr) >= vdso &&
                         reinterpret_cast<std::uintptr_t>(o.phdr) < vdso + 4096;
    if (!self && !is_vdso) continue;
    for (const auto& r : ranges) {
      Code c{self ? "kbv_native's own code" : "the vDSO's code (the process's fast clocks)", r, {}};
      c.bytes.assign(reinterpret_cast<const unsigned char*>(r.begin),
                     reinterpret_cast<const unsigned char*>(r.end));
      s.code.push_back(std::move(c));
    }
    if (!self) continue;
    std::vector<Range> own = ranges;
    for (const auto& [address, name] : GotSlots(o)) {
      Slot slot{name, address, 0, name.starts_with("cuda") || name.starts_with("cu")};
      std::memcpy(&slot.value, reinterpret_cast<const void*>(address), sizeof slot.value);
      // Unresolved (lazy binding, were the module not linked -z now): it changes at first use.
      if (InCode(own, slot.value, 1)) continue;
      KeepEntry(s, code, name, slot.value, slot.quick);
      s.slots.push_back(std::move(slot));
    }
  }
  for (const char* name : kClockFunctions) {
    KeepEntry(s, code, name, reinterpret_cast<std::uintptr_t>(dlsym(RTLD_DEFAULT, name)), false);
  }
}

void IntegrityQuickCheck() {
  State& s = Record();
  if (!s.ready) return;
  Check(s, /*quick_only=*/true, s.notes);
}

void IntegrityNote() {
  State& s = Record();
  if (!s.ready) return;
  Check(s, /*quick_only=*/false, s.notes);
}

std::vector<std::string> IntegrityChanges() {
  State& s = Record();
  if (!s.ready) return {};
  Check(s, /*quick_only=*/false, s.notes);
  std::vector<std::string> out;
  for (auto& note : s.notes) {
    bool seen = false;
    for (const auto& o : out) seen = seen || o == note;
    if (!seen) out.push_back(std::move(note));
  }
  s.notes.clear();
  return out;
}

}  // namespace kbv::native
