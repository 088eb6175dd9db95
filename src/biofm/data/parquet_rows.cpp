#include "biofm/data/parquet_rows.h"

#include "biofm/core/error.h"

#ifdef BIOFM_WITH_PARQUET
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/reader.h>

#include <algorithm>
#include <cctype>
#endif

namespace biofm {

#ifdef BIOFM_WITH_PARQUET

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

struct ParquetRows::Impl {
  std::string path;
  std::unique_ptr<parquet::arrow::FileReader> file;
  std::unique_ptr<arrow::RecordBatchReader> batches;
  std::shared_ptr<arrow::RecordBatch> batch;
  int64_t in_batch = 0;  // next row of `batch`
  uint64_t row = 0;
  bool has_name = false;

  void check(const arrow::Status& s) const {
    if (!s.ok()) fail(path, ": cannot read Parquet: ", s.ToString());
  }

  // Arrow's string and large_string arrays, read the same way.
  static bool is_string(const arrow::DataType& t) {
    return t.id() == arrow::Type::STRING || t.id() == arrow::Type::LARGE_STRING;
  }
  static std::string_view value(const arrow::Array& a, int64_t i) {
    if (a.type_id() == arrow::Type::LARGE_STRING) return static_cast<const arrow::LargeStringArray&>(a).GetView(i);
    return static_cast<const arrow::StringArray&>(a).GetView(i);
  }
};

bool parquet_supported() { return true; }

ParquetRows::ParquetRows(const std::string& path, const std::string& column, const std::string& name_column)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  auto opened = arrow::io::ReadableFile::Open(path);
  if (!opened.ok()) fail("cannot open ", path, ": ", opened.status().ToString());
  auto reader = parquet::arrow::OpenFile(*opened, arrow::default_memory_pool());
  m.check(reader.status());
  m.file = std::move(reader).ValueOrDie();
  std::shared_ptr<arrow::Schema> schema;
  m.check(m.file->GetSchema(&schema));
  std::string names;
  for (int i = 0; i < schema->num_fields(); ++i) names += (i ? ", '" : "'") + schema->field(i)->name() + "'";
  auto find = [&](const std::string& want) {
    int exact = schema->GetFieldIndex(want), nocase = -1, n = 0;
    if (exact >= 0) return exact;
    for (int i = 0; i < schema->num_fields(); ++i)
      if (lower(schema->field(i)->name()) == lower(want)) nocase = i, ++n;
    if (n != 1) fail(path, ": no column '", want, "' in the Parquet schema (columns: ", names, ")");
    return nocase;
  };
  std::vector<int> cols = {find(column)};
  if (!name_column.empty()) cols.push_back(find(name_column));
  m.has_name = cols.size() == 2;
  for (int c : cols) {
    if (schema->field(c)->type()->num_fields() > 0)
      fail(path, ": Parquet column '", schema->field(c)->name(), "' is nested; a flat string column is needed");
    if (c == cols[0] && !Impl::is_string(*schema->field(c)->type()))
      fail(path, ": Parquet column '", schema->field(c)->name(), "' holds ", schema->field(c)->type()->ToString(),
           ", not strings");
  }
  std::vector<int> groups(size_t(m.file->num_row_groups()));
  for (size_t g = 0; g < groups.size(); ++g) groups[g] = int(g);
  // Flat schema: the leaf column index equals the field index.
  auto br = m.file->GetRecordBatchReader(groups, cols);
  m.check(br.status());
  m.batches = std::move(br).ValueOrDie();
}

ParquetRows::~ParquetRows() = default;

bool ParquetRows::next(std::string& value, std::string& name, bool& is_null) {
  Impl& m = *impl_;
  while (!m.batch || m.in_batch >= m.batch->num_rows()) {
    m.check(m.batches->ReadNext(&m.batch));
    if (!m.batch) return false;
    m.in_batch = 0;
  }
  const arrow::Array& seq = *m.batch->column(0);
  const int64_t i = m.in_batch++;
  ++m.row;
  is_null = seq.IsNull(i);
  value.clear();
  name.clear();
  if (is_null) return true;
  value.assign(Impl::value(seq, i));
  if (m.has_name) {
    const arrow::Array& n = *m.batch->column(1);
    if (!n.IsNull(i)) name = Impl::is_string(*n.type()) ? std::string(Impl::value(n, i)) : n.GetScalar(i).ValueOrDie()->ToString();
  }
  return true;
}

uint64_t ParquetRows::row() const { return impl_->row; }

#else  // built without Arrow / Parquet

struct ParquetRows::Impl {};

bool parquet_supported() { return false; }

ParquetRows::ParquetRows(const std::string& path, const std::string&, const std::string&) {
  fail("cannot read ", path,
       ": it is a Parquet file and this biofm was built without Parquet (pip install pyarrow, then rebuild: CMake "
       "finds Arrow/Parquet C++ in the wheel; -DBIOFM_PARQUET=ON makes it required)");
}
ParquetRows::~ParquetRows() = default;
bool ParquetRows::next(std::string&, std::string&, bool&) { return false; }
uint64_t ParquetRows::row() const { return 0; }

#endif

}  // namespace biofm
