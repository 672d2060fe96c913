# Run in script mode: cmake -DOUT=file.c -DSQL_DIR=dir [-DPREFIX=name]
# -P EmbedSQL.cmake. Writes a C file holding every NNN_*.sql of SQL_DIR as
# migration NNN, in order, in the arrays <PREFIX>_migrations and
# <PREFIX>_n_migrations (PREFIX ferry: the SQLite manifest's sql/;
# ferry_pg: the shared manifest's sql/pg/).
if(NOT PREFIX)
  set(PREFIX ferry)
endif()
file(GLOB sql_files "${SQL_DIR}/[0-9][0-9][0-9]_*.sql")
list(SORT sql_files)
set(body "/* generated from sql/ by cmake/EmbedSQL.cmake; do not edit */\n")
string(APPEND body "#include \"manifest.h\"\n\n")
set(table "")
set(i 0)
foreach(f ${sql_files})
  get_filename_component(name ${f} NAME)
  string(SUBSTRING ${name} 0 3 num)
  math(EXPR version "${num}")
  file(READ ${f} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND body "static const char sql_${i}[] = {${bytes}0x00};\n")
  string(APPEND table "        {${version}, \"${name}\", sql_${i}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND body "\nconst struct ferry_migration ${PREFIX}_migrations[] = {\n${table}};\n")
string(APPEND body "const int ${PREFIX}_n_migrations = ${i};\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
