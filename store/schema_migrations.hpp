#pragma once
// The results database's migrations, in order: migration N takes a file from user_version N - 1
// to N (store/schema_migrations.cpp holds their SQL; store/schema.cpp checks and applies them).

namespace lrmoe::store {

struct Migration {
  int version;
  const char* sql;
};

// [begin, end): every migration this build knows, numbered 1, 2, ... in order.
const Migration* schema_migrations_begin();
const Migration* schema_migrations_end();

}  // namespace lrmoe::store
