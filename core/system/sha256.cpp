#include "core/system/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

namespace lrmoe {

namespace {

std::string hex_of(const unsigned char* digest, unsigned int length) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not compute a SHA-256 digest");
  }
  return hex_of(digest.data(), length);
}

struct Sha256::Context {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> evp{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  if (!context_->evp || EVP_DigestInit_ex(context_->evp.get(), EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("OpenSSL could not start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::add(const void* bytes, std::size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_->evp.get(), bytes, size) != 1)
    throw std::runtime_error("OpenSSL could not compute a SHA-256 digest");
}

std::string Sha256::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_->evp.get(), digest.data(), &length) != 1)
    throw std::runtime_error("OpenSSL could not compute a SHA-256 digest");
  return hex_of(digest.data(), length);
}

std::string sha256_file_hex(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  Sha256 digest;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    if (in.gcount() > 0) digest.add(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw std::runtime_error("cannot read " + file.string());
  return digest.hex();
}

}  // namespace lrmoe
