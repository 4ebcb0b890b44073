//===- Coll.g4 - Grammar of the .coll language ----------------------------===//
//
// Whitespace and comments are insignificant: statements need no separator.
// Declarations (param, collective, option, fn) may appear only at the top
// level. Operator precedence follows the order of the `expr` alternatives
// (first binds tightest). See docs/LANGUAGE.md for the semantics.
//
// Lexical errors never stop the lexer: malformed input becomes one of the
// error tokens at the end, which the parser rejects with a precise message.
//
//===----------------------------------------------------------------------===//
grammar Coll;

program : item* EOF ;

item
  : 'param' ID '=' expr                                       # paramItem
  | 'collective' ID '(' args? ')' collectiveBody?             # collectiveItem
  | 'option' option (',' option)*                             # optionItem
  | 'fn' ID '(' (ID (',' ID)*)? ')' block                     # fnItem
  | stmt                                                      # stmtItem
  ;

collectiveBody : '{' ('pre' pre=block)? ('post' post=block)? '}' ;

option : ID '=' expr ;

block : '{' stmt* '}' ;

stmt
  : 'let' ID '=' expr                                         # letStmt
  | ID '=' expr                                               # assignStmt
  | 'for' ID 'in' expr ('..' expr ('step' expr)?)? block      # forStmt
  | 'while' expr block                                        # whileStmt
  | 'if' expr block ('else' 'if' expr block)* ('else' block)? # ifStmt
  | 'return' expr?                                            # returnStmt
  | 'parallelize' '(' expr ')' block                          # parallelizeStmt
  | expr                                                      # exprStmt
  ;

expr
  : expr '.' ID '(' args? ')'                                 # methodExpr
  | expr '.' ID                                               # memberExpr
  | expr '[' expr ']'                                         # indexExpr
  | op=('-' | '!') expr                                       # unaryExpr
  | expr op=('*' | '/' | '%') expr                            # binaryExpr
  | expr op=('+' | '-') expr                                  # binaryExpr
  | expr op=('<' | '<=' | '>' | '>=') expr                    # binaryExpr
  | expr op=('==' | '!=') expr                                # binaryExpr
  | expr op='&&' expr                                         # binaryExpr
  | expr op='||' expr                                         # binaryExpr
  | 'if' expr 'then' expr 'else' expr                         # condExpr
  | ID '(' args? ')'                                          # callExpr
  | '(' expr ')'                                              # parenExpr
  | '[' (expr (',' expr)*)? ']'                               # listExpr
  | INT                                                       # intExpr
  | value=('true' | 'false')                                  # boolExpr
  | STRING                                                    # stringExpr
  | ID                                                        # nameExpr
  ;

args : arg (',' arg)* ;

arg : (name=ID '=')? expr ;

INT : [0-9]+ ;
ID : [a-zA-Z_] [a-zA-Z_0-9]* ;
STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;

LINE_COMMENT : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n]+ -> skip ;

// Error tokens.
UNTERMINATED_STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* ;
// A comment that never closes: no `*/` anywhere up to the end of the file.
UNTERMINATED_COMMENT : '/*' (~'*' | '*'+ ~[*/])* '*'* EOF ;
BAD_CHAR : . ;
